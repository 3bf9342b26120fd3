// A platform stack on AWS: AwsCluster provisions a kubeadm cluster in a VPC of its own, and
// PortableCluster runs portable-lb on it, the VIPs routed through the VPC's route table (no BGP
// peer in a VPC). README.md beside this file lists the stack config and what it costs to run.
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster, parseOrThrow } from "@portable-lb/core";
import { AwsCluster, awsEnvironmentSchema } from "@portable-lb/providers";

const config = new pulumi.Config();

const network = {
  nodeCidr: "10.0.0.0/16", // the VPC
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  // Outside the VPC's range: each VIP/32 is a route in its route table, to an LB node.
  vipPools: [{ name: "web", cidr: "10.200.0.0/24" }],
};

// Checked before anything is created: a wrong key fails `pulumi preview` naming it, its value and the fix.
const environment = parseOrThrow(
  awsEnvironmentSchema,
  {
    kind: "aws",
    region: config.require("region"),
    zones: config.requireObject("zones"),
    apiAccessCidrs: config.requireObject("apiAccessCidrs"),
    // VIPs are private addresses: their clients are in the VPC (or networks joined to it).
    vipAccessCidrs: config.getObject("vipAccessCidrs") ?? [network.nodeCidr],
    ...(config.get("instanceType") !== undefined && { instanceType: config.get("instanceType") }),
    ...(config.getObject("nodes") !== undefined && { nodes: config.getObject("nodes") }),
  },
  "",
);

const aws = new AwsCluster("plb", { environment, network });

const cluster = new PortableCluster("platform", {
  environment: aws.environment,
  network,
  loadBalancer: {
    replicas: aws.environment.lbNodeCount, // one LB pod on each LB node
    image: config.require("lbImage"),
  },
});

// App stacks read these through a StackReference (see ../app-stack).
export const kubeconfig = cluster.kubeconfig;
export const apiAddress = aws.apiAddress;
export const loadBalancerClass = cluster.loadBalancerClass;
export const vipPools = cluster.vipPools;
export const routingMode = cluster.routingMode;
export const nodes = aws.environment.nodes;
