// The cluster's firewall: one security group for every machine (the cluster's own ports among
// themselves, the routers' BGP and BFD in BGP mode), one for the control plane (the API from the
// listed ranges) and one for the LB nodes (the VIP ports from the VIPs' clients). One rule per
// resource, so each is seen, and changed, on its own.
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import {
  API_PORT_RANGE,
  clusterPorts,
  ROUTER_PORTS,
  vipPortRanges,
  type ClusterAccess,
  type PortRange,
} from "../clusterPorts.ts";

export interface AwsSecurityGroupsArgs extends ClusterAccess {
  vpcId: pulumi.Input<string>;
}

export class AwsSecurityGroups extends pulumi.ComponentResource {
  /** On every machine. */
  public readonly nodes: aws.ec2.SecurityGroup;
  public readonly controlPlane: aws.ec2.SecurityGroup;
  public readonly lbNodes: aws.ec2.SecurityGroup;

  constructor(name: string, args: AwsSecurityGroupsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:AwsSecurityGroups", name, {}, opts);
    const child = { parent: this };
    const group = (suffix: string, description: string) =>
      new aws.ec2.SecurityGroup(
        `${name}-${suffix}`,
        {
          vpcId: args.vpcId,
          description,
          tags: { Name: `${args.clusterName}-${suffix}`, "portable-lb.io/cluster": args.clusterName },
        },
        child,
      );
    this.nodes = group("nodes", "portable-lb: between the cluster's machines");
    this.controlPlane = group("control-plane", "portable-lb: the API server from the listed ranges");
    this.lbNodes = group("lb-nodes", "portable-lb: the VIP ports from the VIPs' clients");

    const ingress = (
      to: "nodes" | "control-plane" | "lb-nodes",
      ranges: readonly PortRange[],
      from: { cidr: string } | { group: "nodes" },
    ) => {
      const sg = { nodes: this.nodes, "control-plane": this.controlPlane, "lb-nodes": this.lbNodes }[to];
      const source = "cidr" in from ? from.cidr.replace("/", "_") : from.group;
      for (const r of ranges)
        new aws.vpc.SecurityGroupIngressRule(
          `${name}-${to}-${r.protocol}-${r.from}-from-${source}`,
          {
            securityGroupId: sg.id,
            ipProtocol: r.protocol,
            fromPort: r.from,
            toPort: r.to,
            description: r.why,
            ...("cidr" in from ? { cidrIpv4: from.cidr } : { referencedSecurityGroupId: this.nodes.id }),
          },
          child,
        );
    };
    ingress("nodes", clusterPorts(args.flannelVxlanPort), { group: "nodes" });
    for (const router of args.routers ?? []) ingress("nodes", ROUTER_PORTS, { cidr: `${router}/32` });
    for (const cidr of args.apiAccessCidrs) ingress("control-plane", [API_PORT_RANGE], { cidr });
    for (const cidr of args.vipAccessCidrs) ingress("lb-nodes", vipPortRanges(args.vipPorts), { cidr });
    // Out: package repositories, image registries and (cloud-routes) the EC2 API.
    new aws.vpc.SecurityGroupEgressRule(
      `${name}-nodes-egress`,
      {
        securityGroupId: this.nodes.id,
        ipProtocol: "-1",
        cidrIpv4: "0.0.0.0/0",
        description: "anything out",
      },
      child,
    );
    this.registerOutputs({});
  }
}
