// The cluster's own VPC (network.nodeCidr), one subnet per availability zone as the plan splits it,
// and one route table with the internet gateway as default route: the machines reach package
// repositories without a NAT gateway's hourly cost, and the firewall (awsSecurityGroups.ts) keeps
// everything but the VIP ports and the API closed. The route table is the one cloud-routes writes.
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { CloudSubnet } from "../cloudNodePlan.ts";

export interface AwsNetworkArgs {
  clusterName: string;
  cidr: string;
  /** Zonal subnets (cloudNodePlan). */
  subnets: CloudSubnet[];
}

export class AwsNetwork extends pulumi.ComponentResource {
  public readonly vpcId: pulumi.Output<string>;
  /** By zone. */
  public readonly subnetIds: Record<string, pulumi.Output<string>>;
  public readonly routeTableId: pulumi.Output<string>;

  constructor(name: string, args: AwsNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:AwsNetwork", name, {}, opts);
    const child = { parent: this };
    const tags = (suffix: string) => ({
      Name: `${args.clusterName}-${suffix}`,
      "portable-lb.io/cluster": args.clusterName,
    });

    const vpc = new aws.ec2.Vpc(
      `${name}-vpc`,
      { cidrBlock: args.cidr, enableDnsSupport: true, enableDnsHostnames: true, tags: tags("vpc") },
      child,
    );
    const gateway = new aws.ec2.InternetGateway(`${name}-igw`, { vpcId: vpc.id, tags: tags("igw") }, child);
    const routeTable = new aws.ec2.RouteTable(
      `${name}-rt`,
      { vpcId: vpc.id, routes: [{ cidrBlock: "0.0.0.0/0", gatewayId: gateway.id }], tags: tags("rt") },
      child,
    );
    this.subnetIds = {};
    for (const subnet of args.subnets) {
      const zone = subnet.zone!;
      const s = new aws.ec2.Subnet(
        `${name}-${zone}`,
        { vpcId: vpc.id, cidrBlock: subnet.cidr, availabilityZone: zone, tags: tags(zone) },
        child,
      );
      new aws.ec2.RouteTableAssociation(
        `${name}-${zone}`,
        { subnetId: s.id, routeTableId: routeTable.id },
        child,
      );
      this.subnetIds[zone] = s.id;
    }
    this.vpcId = vpc.id;
    this.routeTableId = routeTable.id;
    this.registerOutputs({ vpcId: this.vpcId, subnetIds: this.subnetIds, routeTableId: this.routeTableId });
  }
}
