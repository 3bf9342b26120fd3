// Least-privilege cloud permissions of the LB instances in routingMode cloud-routes, as data the
// providers attach to the LB instances' role (AWS: an IAM policy on the instance profile; GCP: a
// custom role bound to the instances' service account). Credentials then come from the instance;
// no key is kept in a Secret. The calls are those of lb-image/src/cloudRoutes.
import { ConfigError } from "../validation.ts";

/** An IAM policy document (JSON as AWS takes it). */
export interface AwsPolicyDocument {
  Version: "2012-10-17";
  Statement: { Sid: string; Effect: "Allow"; Action: string[]; Resource: string | string[] }[];
}

/** Route writes on exactly the route tables in use; the Describe calls, which IAM cannot scope. */
export function awsCloudRoutesPolicy(o: {
  region: string;
  accountId: string;
  routeTableIds: readonly string[];
}): AwsPolicyDocument {
  if (o.routeTableIds.length === 0)
    throw new ConfigError(
      "cloudRoutes.routeTableIds: the AWS cloud-routes mode needs at least one route table to write (got []); list the VPC route tables your clients use",
    );
  if (!/^\d{12}$/.test(o.accountId))
    throw new ConfigError(
      `accountId: must be a 12-digit AWS account id (got ${JSON.stringify(o.accountId)})`,
    );
  return {
    Version: "2012-10-17",
    Statement: [
      {
        Sid: "PortableLbRouteWrites",
        Effect: "Allow",
        Action: ["ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute"],
        Resource: o.routeTableIds.map((id) => `arn:aws:ec2:${o.region}:${o.accountId}:route-table/${id}`),
      },
      {
        // Describe* actions support no resource-level permissions in IAM.
        Sid: "PortableLbRouteReads",
        Effect: "Allow",
        Action: ["ec2:DescribeRouteTables", "ec2:DescribeInstances"],
        Resource: "*",
      },
    ],
  };
}

/** The GCP custom role: the compute routes calls, and the network permission a route insert needs. */
export const GCP_CLOUD_ROUTES_PERMISSIONS = [
  "compute.routes.create",
  "compute.routes.delete",
  "compute.routes.get",
  "compute.routes.list",
  "compute.networks.updatePolicy",
  "compute.globalOperations.get",
] as const;

export function gcpCloudRoutesRole(o: { project: string; roleId?: string }) {
  return {
    project: o.project,
    roleId: o.roleId ?? "portableLbCloudRoutes",
    title: "portable-lb cloud routes",
    description: "Lets portable-lb's LB instances steer VIPs through VPC routes to themselves",
    permissions: [...GCP_CLOUD_ROUTES_PERMISSIONS],
    stage: "GA",
  };
}
