// A platform stack on GCP: GcpCluster provisions a kubeadm cluster in a VPC network of its own, and
// PortableCluster runs portable-lb on it, the VIPs routed through the network's routes (equal
// priority: ECMP over the LB nodes). README.md beside this file lists the stack config and the cost.
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster, parseOrThrow } from "@portable-lb/core";
import { GcpCluster, gcpEnvironmentSchema } from "@portable-lb/providers";

const config = new pulumi.Config();

const network = {
  nodeCidr: "10.0.0.0/20", // the subnetwork
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  // Outside the subnetwork: each VIP/32 is a route in the network, to the LB nodes.
  vipPools: [{ name: "web", cidr: "10.200.0.0/24" }],
};

// Checked before anything is created: a wrong key fails `pulumi preview` naming it, its value and the fix.
const environment = parseOrThrow(
  gcpEnvironmentSchema,
  {
    kind: "gcp",
    project: config.require("project"),
    region: config.require("region"),
    zones: config.requireObject("zones"),
    apiAccessCidrs: config.requireObject("apiAccessCidrs"),
    // VIPs are private addresses: their clients are in the network (or networks joined to it).
    vipAccessCidrs: config.getObject("vipAccessCidrs") ?? [network.nodeCidr],
    ...(config.get("machineType") !== undefined && { machineType: config.get("machineType") }),
    ...(config.getObject("nodes") !== undefined && { nodes: config.getObject("nodes") }),
  },
  "",
);

const gcp = new GcpCluster("plb", { environment, network });

const cluster = new PortableCluster("platform", {
  environment: gcp.environment,
  network,
  loadBalancer: {
    replicas: gcp.environment.lbNodeCount, // one LB pod on each LB node
    image: config.require("lbImage"),
  },
});

// App stacks read these through a StackReference (see ../app-stack).
export const kubeconfig = cluster.kubeconfig;
export const apiAddress = gcp.apiAddress;
export const loadBalancerClass = cluster.loadBalancerClass;
export const vipPools = cluster.vipPools;
export const routingMode = cluster.routingMode;
export const nodes = gcp.environment.nodes;
