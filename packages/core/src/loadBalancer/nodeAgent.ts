// The node agent: a DaemonSet on the LB nodes, in the node's network namespace, that routes the VIP
// pools from the node to its local LB pod (the upstream router's next hop for a VIP is the node).
// It may read the LB namespace's Pods and change the node's routes (NET_ADMIN); nothing else.
// With direct server return (`dsr`) it runs on every node, since any node may run backends, and
// prepares the backend pods' namespaces and the node (lb-image/src/nodeAgent/dsr): it then also
// reads Services and EndpointSlices, enters pod network namespaces (setns needs CAP_SYS_ADMIN;
// no narrower capability allows it), sees the runtime's netns directory (read-only, with
// HostToContainer propagation so pods started later appear) and writes the node's and pods'
// net sysctls through a hostPath mount of /proc/sys/net, as Cilium's agent does. Never privileged.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { LbConfig } from "../config/lbConfig.ts";
import { LB_COMMANDS, LB_ENV, LB_HTTP_PATHS, LB_PATHS } from "../config/lbImage.ts";
import { minimalSecurityContext } from "../containerSecurity.ts";
import { standardLabels } from "../labels.ts";
import { LB_NODE_TOLERATIONS } from "./podSpec.ts";
import { NODE_AGENT_DSR_CLUSTER_RULES, NODE_AGENT_IPIP_RULES, NODE_AGENT_RULES } from "./rbac.ts";
import { clusterRoleFor, serviceAccountWithRole } from "./serviceAccountWithRole.ts";

export const NODE_AGENT_NAME = "portable-lb-node-agent";

export interface NodeAgentArgs {
  namespace: pulumi.Input<string>;
  config: LbConfig;
  /** The LB config's ConfigMap (key config.json), shared with the LB pods. */
  configMapName: string;
  /** Carries the config hash, so a config change rolls the agents. */
  podAnnotations: Record<string, pulumi.Input<string>>;
  image: string;
  nodeSelector: Record<string, string>;
  priorityClassName: string;
  /** See LoadBalancerArgs.skipAwait. */
  skipAwait?: boolean;
  /** Direct server return in use: the agent runs on every node and prepares backend pods. */
  dsr?: { netnsDir: string };
}

const NETNS_VOLUME = "pod-netns";
const PROC_SYS_NET_VOLUME = "proc-sys-net";

export function nodeAgentPodSpec(args: NodeAgentArgs): k8s.types.input.core.v1.PodSpec {
  const port = args.config.ports.nodeAgent;
  const dsr = args.dsr;
  return {
    serviceAccountName: NODE_AGENT_NAME,
    priorityClassName: args.priorityClassName,
    // Routes live in the node's network namespace.
    hostNetwork: true,
    dnsPolicy: "ClusterFirstWithHostNet",
    // DSR backends may run on any node.
    ...(!dsr && { nodeSelector: args.nodeSelector }),
    tolerations: LB_NODE_TOLERATIONS,
    containers: [
      {
        name: "node-agent",
        image: args.image,
        command: [LB_COMMANDS.nodeAgent, "--config", LB_PATHS.configFile],
        env: [
          { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
          { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
          ...(dsr ? [{ name: LB_ENV.dsrNetnsDir, value: dsr.netnsDir }] : []),
        ],
        ports: [{ name: "health", containerPort: port, protocol: "TCP" }],
        securityContext: minimalSecurityContext(dsr ? ["NET_ADMIN", "SYS_ADMIN"] : ["NET_ADMIN"]),
        livenessProbe: { httpGet: { path: LB_HTTP_PATHS.healthz, port }, periodSeconds: 10 },
        readinessProbe: { httpGet: { path: LB_HTTP_PATHS.readyz, port }, periodSeconds: 5 },
        resources: { requests: { cpu: "20m", memory: "48Mi" }, limits: { memory: "192Mi" } },
        volumeMounts: [
          { name: "config", mountPath: LB_PATHS.configDir, readOnly: true },
          ...(dsr
            ? [
                {
                  name: NETNS_VOLUME,
                  mountPath: dsr.netnsDir,
                  readOnly: true,
                  mountPropagation: "HostToContainer",
                },
                { name: PROC_SYS_NET_VOLUME, mountPath: LB_PATHS.hostProcSysNet },
              ]
            : []),
        ],
      },
    ],
    volumes: [
      { name: "config", configMap: { name: args.configMapName } },
      ...(dsr
        ? [
            // The runtime makes it with the node's first pod; the agent may start first.
            { name: NETNS_VOLUME, hostPath: { path: dsr.netnsDir, type: "DirectoryOrCreate" } },
            { name: PROC_SYS_NET_VOLUME, hostPath: { path: "/proc/sys/net", type: "Directory" } },
          ]
        : []),
    ],
  };
}

export class NodeAgent extends pulumi.ComponentResource {
  public readonly serviceAccount: k8s.core.v1.ServiceAccount;
  public readonly role: k8s.rbac.v1.Role;
  public readonly daemonSet: k8s.apps.v1.DaemonSet;

  constructor(name: string, args: NodeAgentArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:NodeAgent", name, {}, opts);
    const labels = standardLabels("node-agent", { app: NODE_AGENT_NAME });
    const meta = { namespace: args.namespace, labels };
    ({ serviceAccount: this.serviceAccount, role: this.role } = serviceAccountWithRole(
      name,
      NODE_AGENT_NAME,
      meta,
      [
        ...NODE_AGENT_RULES,
        ...(args.dsr && args.config.dataPlane.engine === "ipvs" ? NODE_AGENT_IPIP_RULES : []),
      ],
      { parent: this },
    ));
    if (args.dsr)
      clusterRoleFor(
        name,
        NODE_AGENT_NAME,
        labels,
        NODE_AGENT_DSR_CLUSTER_RULES,
        { name: this.serviceAccount.metadata.name, namespace: args.namespace },
        { parent: this },
      );
    this.daemonSet = new k8s.apps.v1.DaemonSet(
      `${name}-daemonset`,
      {
        metadata: {
          name: NODE_AGENT_NAME,
          ...meta,
          ...(args.skipAwait && { annotations: { "pulumi.com/skipAwait": "true" } }),
        },
        spec: {
          selector: { matchLabels: { app: NODE_AGENT_NAME } },
          updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
          template: {
            metadata: { labels, annotations: args.podAnnotations },
            spec: nodeAgentPodSpec(args),
          },
        },
      },
      { parent: this, dependsOn: [this.role] },
    );
    this.registerOutputs({ daemonSet: this.daemonSet.metadata.name });
  }
}
