// The root program: a portable-lb platform in the environment named by the stack's config.
// Settings (all under the `portable-lb:` namespace; see README.md):
//   environment   where the cluster is and what it offers (kind, kubeconfig, platform, bgp.routers)
//   network       nodeCidr, podCidr, serviceCidr, vipPools
//   loadBalancer  replicas, bgp.asn, routeReflectors, dataPlane, image, ...
//   routing       auto | bgp | cloud-routes          flannel   { backend }
//   bgpPassword   (secret) TCP MD5 password for every BGP session
//   skipAwait     don't wait for pods to become ready (clusters without kubelets, in tests)
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster, type PortableClusterArgs, type RoutingChoice } from "@portable-lb/core";
import { environmentFromConfig } from "@portable-lb/providers";

const config = new pulumi.Config();
const loadBalancer = config.requireObject<PortableClusterArgs["loadBalancer"]>("loadBalancer");
const bgpPassword = config.getSecret("bgpPassword");
const flannel = config.getObject<PortableClusterArgs["flannel"]>("flannel");

const cluster = new PortableCluster("portable-lb", {
  environment: environmentFromConfig(config),
  network: config.requireObject("network"),
  routing: config.get<RoutingChoice>("routing") ?? "auto",
  ...(flannel && { flannel }),
  loadBalancer: {
    ...loadBalancer,
    ...(loadBalancer.bgp && bgpPassword && { bgp: { ...loadBalancer.bgp, password: bgpPassword } }),
  },
  skipAwait: config.getBoolean("skipAwait") ?? false,
});

export const kubeconfig = cluster.kubeconfig;
export const loadBalancerClass = cluster.loadBalancerClass;
export const vipPools = cluster.vipPools;
export const routingMode = cluster.routingMode;
export const routerConfig = cluster.routerConfig;
export const routerAdvice = cluster.routerAdvice;
