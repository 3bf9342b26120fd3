// The root program: a portable-lb platform in the environment named by the stack's config.
// Settings (all under the `portable-lb:` namespace; see README.md):
//   environment   where the cluster is: kind kubeconfig (an existing cluster), onprem, aws or gcp
//                 (one this program provisions, through @portable-lb/providers), or lab (this machine)
//   network       nodeCidr, podCidr, serviceCidr, vipPools
//   loadBalancer  replicas, bgp.asn, routeReflectors, dataPlane, image, ...
//   routing       auto | bgp | cloud-routes          flannel   { backend }
//   bgpPassword   (secret) TCP MD5 password for every BGP session
//   sshPrivateKey (secret) onprem: the key that logs in to every machine
//   skipAwait     don't wait for pods to become ready (clusters without kubelets, in tests)
//   demoApp       { replicas }: the demo web service behind a VIP (the lab stack deploys it)
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster, type PortableClusterArgs, type RoutingChoice } from "@portable-lb/core";
import { DemoWebApp, LAB_ROLE_LABEL, environmentFromConfig } from "@portable-lb/lab";
// Extensionless: the engine runs this file through ts-node, which does not rewrite ".ts" imports.
import { checkStackInput } from "./stackInput";

async function main() {
  const config = new pulumi.Config();
  // Every setting is checked, and the cluster asked whether it answers, before anything is created.
  await checkStackInput(config);
  const loadBalancer = config.requireObject<PortableClusterArgs["loadBalancer"]>("loadBalancer");
  const bgpPassword = config.getSecret("bgpPassword");
  const flannel = config.getObject<PortableClusterArgs["flannel"]>("flannel");
  const demoApp = config.getObject<{ replicas: number }>("demoApp");
  const environment = environmentFromConfig(config);
  const lab = environment.lab;

  const cluster = new PortableCluster("portable-lb", {
    environment,
    network: config.requireObject("network"),
    routing: config.get<RoutingChoice>("routing") ?? "auto",
    ...(flannel && { flannel }),
    loadBalancer: {
      // The lab knows where its reflectors go (its first worker nodes).
      ...(lab && { routeReflectors: lab.routeReflectors }),
      ...loadBalancer,
      ...(loadBalancer.bgp && bgpPassword && { bgp: { ...loadBalancer.bgp, password: bgpPassword } }),
    },
    skipAwait: config.getBoolean("skipAwait") ?? false,
  });

  // The lab's router peers with the reflectors using exactly what a user would paste into theirs.
  if (lab && cluster.routerConfig) lab.router(cluster.routerConfig, { dependsOn: [cluster] });
  // Its cluster DNS, as kubeadm's clusters have: pods on the pod network once flannel runs.
  lab?.clusterDns({ provider: cluster.provider, dependsOn: [cluster.flannel] });
  const demo =
    demoApp &&
    new DemoWebApp(
      "demo",
      {
        replicas: demoApp.replicas,
        vipPools: cluster.vipPools,
        loadBalancerClass: cluster.loadBalancerClass,
        ...(lab && { nodeSelector: { [LAB_ROLE_LABEL]: "worker" } }),
      },
      { provider: cluster.provider, dependsOn: [cluster] },
    );

  // Outputs that do not apply are left out (Pulumi warns about each undefined one).
  return {
    kubeconfig: cluster.kubeconfig,
    loadBalancerClass: cluster.loadBalancerClass,
    vipPools: cluster.vipPools,
    routingMode: cluster.routingMode,
    ...(cluster.routerConfig && { routerConfig: cluster.routerConfig, routerAdvice: cluster.routerAdvice }),
    ...(demo && { demoVip: demo.vip }),
    /** A provisioned cluster's machines: names, roles, zones and addresses (for routeReflectors). */
    ...(environment.nodes && { nodes: environment.nodes }),
    /** The lab's namespaces and addresses (for `npm run lab`'s report and the end-to-end test). */
    ...(lab && { labPlan: lab.plan }),
  };
}

// Pulumi runs an exported function, awaits it and takes what it returns as the stack's outputs:
// the checks above are asynchronous (the cluster probe) and must finish before any resource exists.
module.exports = main;
