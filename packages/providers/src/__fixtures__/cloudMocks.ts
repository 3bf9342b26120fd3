// What the aws, gcp, tls and random providers would return under Pulumi's mocks, for the cloud
// clusters' graph tests: the addresses, names and ids a cloud assigns, and its data sources.
import { installMocks, type RecordedResource } from "../../../../test/unit/pulumiMocks.ts";
import { credentialOutputs } from "../bootstrap/__fixtures__/testCredentials.ts";

export const AWS_ACCOUNT = "123456789012";
export const AWS_API_IP = "203.0.113.7";
export const GCP_PROJECT = "my-project-123";
export const GCP_API_IP = "203.0.113.9";
export const DEBIAN_AMI = "ami-0debian12";
/** The cluster's route table: an id of AWS's shape, which the LB config checks. */
export const AWS_ROUTE_TABLE_ID = "rtb-0a1b2c3d4e5f60718";

export function cloudId(type: string): string | undefined {
  return type === "aws:ec2/routeTable:RouteTable" ? AWS_ROUTE_TABLE_ID : undefined;
}

export function cloudOutputs(type: string, inputs: Record<string, unknown>): Record<string, unknown> | undefined {
  return (
    credentialOutputs(type) ??
    {
      "aws:ec2/eip:Eip": { publicIp: AWS_API_IP },
      "aws:iam/role:Role": { name: "plb-lb-role" },
      "aws:iam/instanceProfile:InstanceProfile": { name: "plb-lb-profile" },
      "gcp:compute/address:Address": { address: GCP_API_IP },
      "gcp:serviceaccount/account:Account": {
        email: `${String(inputs.accountId)}@${GCP_PROJECT}.iam.gserviceaccount.com`,
      },
      "gcp:projects/iAMCustomRole:IAMCustomRole": {
        name: `projects/${GCP_PROJECT}/roles/${String(inputs.roleId)}`,
      },
    }[type]
  );
}

export function cloudCall(token: string): Record<string, unknown> | undefined {
  return {
    "aws:index/getCallerIdentity:getCallerIdentity": {
      accountId: AWS_ACCOUNT,
      arn: `arn:aws:iam::${AWS_ACCOUNT}:user/test`,
      userId: "test",
      id: AWS_ACCOUNT,
    },
    "aws:ec2/getAmi:getAmi": { id: DEBIAN_AMI },
  }[token];
}

/** Pulumi's mocks answering as the clouds would; `onCall` sees each data source call. */
export function installCloudMocks(
  onCall?: (token: string, inputs: Record<string, unknown>) => void,
): RecordedResource[] {
  return installMocks({
    outputs: (type, _name, inputs) => cloudOutputs(type, inputs),
    call: (token, inputs) => {
      onCall?.(token, inputs);
      return cloudCall(token);
    },
    id: cloudId,
  });
}
