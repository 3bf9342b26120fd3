// A platform stack: portable-lb on a cluster you already have. Stack config:
//   pulumi config set kubeconfig ~/.kube/config
//   pulumi config set lbImage registry.example.com/portable-lb/lb:0.1.0   # npm run image -- --push it
//   pulumi config set --secret bgpPassword '...'
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster } from "@portable-lb/core";
import { resolveEnvironment } from "@portable-lb/providers";

const config = new pulumi.Config();

const cluster = new PortableCluster("platform", {
  environment: resolveEnvironment({
    kind: "kubeconfig",
    kubeconfig: config.require("kubeconfig"),
    platform: "onprem",
    bgp: { routers: ["10.0.0.1"] },
    lbNodeCount: 3,
  }),
  network: {
    nodeCidr: "10.0.0.0/24",
    podCidr: "10.244.0.0/16",
    serviceCidr: "10.96.0.0/16",
    vipPools: [
      { name: "web", cidr: "10.1.1.0/24" },
      { name: "internal", cidr: "10.1.2.0/24" },
    ],
  },
  loadBalancer: {
    replicas: 3,
    image: config.require("lbImage"),
    bgp: { asn: 64512, password: config.requireSecret("bgpPassword"), bfd: { minRxMs: 100, minTxMs: 100 } },
    routeReflectors: [
      { node: "rr1", address: "10.0.0.5" },
      { node: "rr2", address: "10.0.0.6" },
    ],
  },
});

// App stacks read these through a StackReference (see ../app-stack).
export const kubeconfig = cluster.kubeconfig;
export const loadBalancerClass = cluster.loadBalancerClass;
export const vipPools = cluster.vipPools;
export const routerConfig = cluster.routerConfig;
export const routerAdvice = cluster.routerAdvice;
