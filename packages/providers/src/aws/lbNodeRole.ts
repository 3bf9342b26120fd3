// The LB nodes' AWS identity in cloud-routes mode: a role EC2 instances assume, with core's
// least-privilege route policy (route writes on this cluster's route table only) and the instance
// profile that carries it. The LB pods get their credentials from the instance; no key is stored.
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { awsCloudRoutesPolicy } from "@portable-lb/core";

export interface LbNodeRoleArgs {
  clusterName: string;
  region: string;
  accountId: pulumi.Input<string>;
  routeTableIds: pulumi.Input<string[]>;
}

/** Only EC2 instances may assume the role. */
export const EC2_ASSUME_ROLE_POLICY = {
  Version: "2012-10-17",
  Statement: [{ Effect: "Allow", Principal: { Service: "ec2.amazonaws.com" }, Action: "sts:AssumeRole" }],
};

export class LbNodeRole extends pulumi.ComponentResource {
  public readonly instanceProfileName: pulumi.Output<string>;

  constructor(name: string, args: LbNodeRoleArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:LbNodeRole", name, {}, opts);
    const child = { parent: this };
    const role = new aws.iam.Role(
      `${name}-role`,
      {
        assumeRolePolicy: JSON.stringify(EC2_ASSUME_ROLE_POLICY),
        description: `portable-lb ${args.clusterName}: LB nodes write VIP routes (cloud-routes mode)`,
        tags: { "portable-lb.io/cluster": args.clusterName },
      },
      child,
    );
    new aws.iam.RolePolicy(
      `${name}-cloud-routes`,
      {
        role: role.name,
        policy: pulumi
          .all([args.accountId, args.routeTableIds])
          .apply(([accountId, routeTableIds]) =>
            JSON.stringify(awsCloudRoutesPolicy({ region: args.region, accountId, routeTableIds })),
          ),
      },
      child,
    );
    const profile = new aws.iam.InstanceProfile(`${name}-profile`, { role: role.name }, child);
    this.instanceProfileName = profile.name;
    this.registerOutputs({ instanceProfileName: this.instanceProfileName });
  }
}
