// The lab's demo web service, as in the papers' experiments: pods that answer every request with
// their own IP, behind a LoadBalancer Service of portable-lb's class, so a client sees which backend
// served it. The container is stock Node (`node:24-slim`); in the lab the agent runs its command with
// this machine's node.
import { LoadBalancerService, type VipPool } from "@portable-lb/core";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";

export interface DemoWebAppArgs {
  replicas: number;
  vipPools: VipPool[];
  loadBalancerClass: string;
  /** Where the pods may run (the lab: its worker nodes). */
  nodeSelector?: Record<string, string>;
  namespace?: string;
}

const PORT = 8080;
// SIGTERM ends it at once: it holds no state, and the LB stops sending to it before the kubelet signals.
const SERVER = [
  'const ip = process.env.POD_IP + "\\n";',
  'require("node:http").createServer((req, res) => res.end(ip)).listen(' + PORT + ");",
  'process.on("SIGTERM", () => process.exit(0));',
].join(" ");

export class DemoWebApp extends pulumi.ComponentResource {
  public readonly service: LoadBalancerService;
  /** The VIP the LB controller assigned. */
  public readonly vip: pulumi.Output<string>;

  constructor(name: string, args: DemoWebAppArgs, opts?: pulumi.ComponentResourceOptions) {
    // Keeps its first type name, as Lab does (existing stacks' URNs).
    super("portable-lb:providers:DemoWebApp", name, {}, opts);
    const child = { parent: this };
    const labels = { app: name };
    const ns = new k8s.core.v1.Namespace(
      `${name}-ns`,
      {
        metadata: {
          name: args.namespace ?? name,
          labels: { "pod-security.kubernetes.io/enforce": "restricted" },
        },
      },
      child,
    );
    new k8s.apps.v1.Deployment(
      name,
      {
        metadata: { name, namespace: ns.metadata.name, labels },
        spec: {
          replicas: args.replicas,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              ...(args.nodeSelector && { nodeSelector: args.nodeSelector }),
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 65534,
                seccompProfile: { type: "RuntimeDefault" },
              },
              containers: [
                {
                  name: "web",
                  image: "node:24-slim",
                  command: ["node", "-e", SERVER],
                  env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
                  ports: [{ name: "http", containerPort: PORT }],
                  readinessProbe: { httpGet: { path: "/", port: PORT }, periodSeconds: 2 },
                  resources: { requests: { cpu: "50m", memory: "32Mi" }, limits: { memory: "128Mi" } },
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
      child,
    );
    this.service = new LoadBalancerService(
      name,
      {
        namespace: ns.metadata.name,
        name,
        selector: labels,
        ports: [{ name: "http", port: 80, targetPort: PORT }],
        vipPools: args.vipPools,
        loadBalancerClass: args.loadBalancerClass,
      },
      child,
    );
    this.vip = this.service.ingress.apply((ips) => ips[0] ?? "");
    this.registerOutputs({ vip: this.vip });
  }
}
