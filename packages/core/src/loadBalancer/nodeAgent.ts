// The node agent: a DaemonSet on the LB nodes, in the node's network namespace, that routes the VIP
// pools from the node to its local LB pod (the upstream router's next hop for a VIP is the node).
// It may read the LB namespace's Pods and change the node's routes (NET_ADMIN); nothing else.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { LbConfig } from "../config/lbConfig.ts";
import { LB_COMMANDS, LB_HTTP_PATHS, LB_PATHS } from "../config/lbImage.ts";
import { minimalSecurityContext } from "../containerSecurity.ts";
import { standardLabels } from "../labels.ts";
import { LB_NODE_TOLERATIONS } from "./podSpec.ts";
import { NODE_AGENT_RULES } from "./rbac.ts";
import { serviceAccountWithRole } from "./serviceAccountWithRole.ts";

export const NODE_AGENT_NAME = "portable-lb-node-agent";

export interface NodeAgentArgs {
  namespace: pulumi.Input<string>;
  config: LbConfig;
  /** The LB config's ConfigMap (key config.json), shared with the LB pods. */
  configMapName: string;
  /** Carries the config hash, so a config change rolls the agents. */
  podAnnotations: Record<string, string>;
  image: string;
  nodeSelector: Record<string, string>;
  priorityClassName: string;
  /** See LoadBalancerArgs.skipAwait. */
  skipAwait?: boolean;
}

export function nodeAgentPodSpec(args: NodeAgentArgs): k8s.types.input.core.v1.PodSpec {
  const port = args.config.ports.nodeAgent;
  return {
    serviceAccountName: NODE_AGENT_NAME,
    priorityClassName: args.priorityClassName,
    // Routes live in the node's network namespace.
    hostNetwork: true,
    dnsPolicy: "ClusterFirstWithHostNet",
    nodeSelector: args.nodeSelector,
    tolerations: LB_NODE_TOLERATIONS,
    containers: [
      {
        name: "node-agent",
        image: args.image,
        command: [LB_COMMANDS.nodeAgent, "--config", LB_PATHS.configFile],
        env: [
          { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
          { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
        ],
        ports: [{ name: "health", containerPort: port, protocol: "TCP" }],
        securityContext: minimalSecurityContext(["NET_ADMIN"]),
        livenessProbe: { httpGet: { path: LB_HTTP_PATHS.healthz, port }, periodSeconds: 10 },
        readinessProbe: { httpGet: { path: LB_HTTP_PATHS.readyz, port }, periodSeconds: 5 },
        resources: { requests: { cpu: "20m", memory: "48Mi" }, limits: { memory: "192Mi" } },
        volumeMounts: [{ name: "config", mountPath: LB_PATHS.configDir, readOnly: true }],
      },
    ],
    volumes: [{ name: "config", configMap: { name: args.configMapName } }],
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
      NODE_AGENT_RULES,
      { parent: this },
    ));
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
