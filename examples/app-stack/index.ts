// An app stack: a web Deployment behind a VIP. It knows nothing of where it runs: everything
// environment specific (the cluster's kubeconfig, the LB class, the VIP pools) comes from the
// platform stack's outputs, so moving to another platform is one setting:
//   pulumi config set platform organization/portable-lb/aws
// Settings (project `shop`):
//   platform   (required) the platform stack, e.g. organization/portable-lb/onprem
//   image      (required) the web server's image: it listens on :80 and answers with its pod's IP
//   replicas   default 2
//   pool       the VIP pool to allocate from; default "web"
//   vip        a specific VIP instead (a migration by BGP keeps the old platform's)
//   announce   false: keep serving but stop announcing the VIP (a migration's "move traffic")
//   handover   { from, relay, acceptFrom }: a migration by BGP (examples/migrate sets it): the other
//              platform's LB node (and, in acceptFrom, LB pod) addresses, and which flows to relay
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { LoadBalancerService, type LoadBalancerServiceArgs, type VipPool } from "@portable-lb/core";

const WEB_PORT = 80;

// Pulumi calls the exported function and awaits it: the platform's pools and class must be known
// before the Service is declared, so a pool the platform lacks fails at preview.
async function main() {
  const config = new pulumi.Config();
  const platform = new pulumi.StackReference("platform", { name: config.require("platform") });
  const [vipPools, loadBalancerClass] = await Promise.all([
    platform.requireOutputValue("vipPools") as Promise<VipPool[]>,
    platform.requireOutputValue("loadBalancerClass") as Promise<string>,
  ]);
  const provider = new k8s.Provider("platform", { kubeconfig: platform.requireOutput("kubeconfig") });

  const ns = new k8s.core.v1.Namespace(
    "shop",
    { metadata: { name: "shop", labels: { "pod-security.kubernetes.io/enforce": "restricted" } } },
    { provider },
  );
  const labels = { app: "web" };
  const web = new k8s.apps.v1.Deployment(
    "web",
    {
      metadata: { name: "web", namespace: ns.metadata.name, labels },
      spec: {
        replicas: config.getNumber("replicas") ?? 2,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65534,
              seccompProfile: { type: "RuntimeDefault" },
              // Port 80 as a non-root user: direct server return hands packets over unchanged, so the
              // pods listen on the port clients use.
              sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: String(WEB_PORT) }],
            },
            containers: [
              {
                name: "web",
                image: config.require("image"),
                args: ["--listen", `:${WEB_PORT}`],
                env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
                ports: [{ name: "http", containerPort: WEB_PORT }],
                readinessProbe: { httpGet: { path: "/", port: WEB_PORT }, periodSeconds: 2 },
                // Drain before SIGTERM: the endpoint is already terminating, open connections finish.
                lifecycle: { preStop: { sleep: { seconds: 6 } } },
                resources: { requests: { cpu: "50m", memory: "16Mi" }, limits: { memory: "64Mi" } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
              },
            ],
          },
        },
      },
    },
    { provider },
  );

  const vip = config.get("vip");
  const announce = config.getBoolean("announce");
  const handover = config.getObject<LoadBalancerServiceArgs["handover"]>("handover");
  const svc = new LoadBalancerService(
    "web",
    {
      namespace: ns.metadata.name,
      name: "web",
      selector: labels,
      ports: [{ name: "http", port: WEB_PORT, targetPort: WEB_PORT }],
      vipPools,
      loadBalancerClass,
      ...(vip ? { vips: [vip] } : { pool: config.get("pool") ?? "web" }),
      ...(announce !== undefined && { announce }),
      ...(handover && { handover }),
    },
    { provider, dependsOn: [web] },
  );
  const address = svc.ingress.apply((ips) => ips[0] ?? "");
  return { vip: address, url: pulumi.interpolate`http://${address}/` };
}

module.exports = main;
