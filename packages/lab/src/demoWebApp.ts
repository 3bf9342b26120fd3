// The lab's demo web service, as in the papers' experiments: pods that answer every request with
// their own IP, behind a LoadBalancer Service of portable-lb's class, so a client sees which backend
// served it. The container is the lab's demo-web image (scripts/image/demo-web: a small Go server),
// imported into every lab node's containerd.
import { LoadBalancerService, restrictedPodSecurityContext, type VipPool } from "@portable-lb/core";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { labImage } from "./node/labImages.ts";

export interface DemoWebAppArgs {
  replicas: number;
  vipPools: VipPool[];
  loadBalancerClass: string;
  /** Where the pods may run (the lab: its worker nodes). */
  nodeSelector?: Record<string, string>;
  namespace?: string;
}

// The Service's own port: direct server return hands packets over unchanged, so the pods listen on
// the port clients use (a non-root server may bind it through the safe unprivileged-port sysctl).
export const DEMO_PORT = 80;

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
                ...restrictedPodSecurityContext(65534),
                sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: String(DEMO_PORT) }],
              },
              containers: [
                {
                  name: "web",
                  image: labImage("demo-web").ref,
                  args: ["--listen", `:${DEMO_PORT}`],
                  env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
                  ports: [{ name: "http", containerPort: DEMO_PORT }],
                  readinessProbe: { httpGet: { path: "/", port: DEMO_PORT }, periodSeconds: 2 },
                  // The usual drain before SIGTERM: the endpoint is terminating from the start, so no LB
                  // sends it a new connection, while the open ones (the kept-connection bench's take
                  // 5 s to send their request) still get their answers.
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
      child,
    );
    this.service = new LoadBalancerService(
      name,
      {
        namespace: ns.metadata.name,
        name,
        selector: labels,
        ports: [{ name: "http", port: 80, targetPort: DEMO_PORT }],
        vipPools: args.vipPools,
        loadBalancerClass: args.loadBalancerClass,
      },
      child,
    );
    this.vip = this.service.ingress.apply((ips) => ips[0] ?? "");
    this.registerOutputs({ vip: this.vip });
  }
}
