// An app stack: a web Deployment behind a VIP. It knows nothing of the environment: it reads the
// platform stack's outputs, so moving to another cloud is `pulumi config set platform org/platform/aws`.
//   pulumi config set platform organization/platform/onprem
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { LoadBalancerService, type VipPool } from "@portable-lb/core";

const config = new pulumi.Config();
const platform = new pulumi.StackReference(config.require("platform"));
const provider = new k8s.Provider("platform", { kubeconfig: platform.requireOutput("kubeconfig") });

const ns = new k8s.core.v1.Namespace("shop", { metadata: { name: "shop" } }, { provider });
const labels = { app: "web" };
new k8s.apps.v1.Deployment(
  "web",
  {
    metadata: { name: "web", namespace: ns.metadata.name },
    spec: {
      replicas: 3,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [{ name: "web", image: "nginx:1.27", ports: [{ name: "http", containerPort: 80 }] }],
        },
      },
    },
  },
  { provider },
);

// The pools and the class come from the platform; the requested pool is checked against them at
// preview. The program is an async function so it can read them before declaring the Service.
export default async function main(): Promise<{ vip: pulumi.Output<string[]> }> {
  const vipPools = (await platform.requireOutputValue("vipPools")) as VipPool[];
  const loadBalancerClass = (await platform.requireOutputValue("loadBalancerClass")) as string;
  const svc = new LoadBalancerService(
    "web",
    {
      namespace: "shop",
      name: "web",
      selector: labels,
      ports: [{ name: "http", port: 80, targetPort: "http" }],
      vipPools,
      loadBalancerClass,
      pool: "web",
    },
    { provider, dependsOn: [ns] },
  );
  return { vip: svc.ingress };
}
