// The LoadBalancer component: everything the LB pods need in the cluster, from one validated config.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { CONFIG_HASH_ANNOTATION, configHash } from "../configHash.ts";
import {
  lbConfigSchema,
  lbConfigSchemaRouteTablesLater,
  type LbConfig,
  type LbConfigInput,
} from "../config/lbConfig.ts";
import { SystemNamespace } from "../systemNamespace.ts";
import { ConfigError, parseOrThrow } from "../validation.ts";
import { LB_PATHS, LB_POD_LABELS } from "../config/lbImage.ts";
import { lbImageRef } from "../config/lbImageRef.ts";
import { DEFAULT_LB_NODE_SELECTOR, LB_APP_LABEL, lbPodSpec } from "./podSpec.ts";
import { monitoringSchema, type MonitoringArgs } from "../config/monitoring.ts";
import { PodMonitors, scrapeAnnotations, type ScrapeTarget } from "./monitoring.ts";
import { NODE_AGENT_NAME, NodeAgent } from "./nodeAgent.ts";
import {
  LB_CLOUD_ROUTES_CLUSTER_RULES,
  LB_CLUSTER_RULES,
  LB_DSR_CLUSTER_RULES,
  LB_LEASE_WATCH_RULES,
  LB_NAMESPACE_RULES,
} from "./rbac.ts";
import { clusterRoleFor, serviceAccountWithRole } from "./serviceAccountWithRole.ts";

export const DEFAULT_LB_NAMESPACE = "portable-lb-system";
export const LB_PRIORITY_CLASS = "portable-lb-dataplane";
const NAME = "portable-lb-controller";

/** Where containerd's and CRI-O's CNI setups mount pods' network namespaces. */
export const DEFAULT_POD_NETNS_DIR = "/run/netns";

export interface LoadBalancerArgs {
  /** The LB configuration; validated when the program runs (so at `pulumi preview`). */
  config: LbConfigInput;
  /** How many LB pods (one per LB node). */
  replicas: number;
  /** How many nodes carry the LB node label, when known: more replicas than that could never schedule. */
  lbNodeCount?: number;
  namespace?: string;
  /** The LB image (`npm run image -- --push REF`); required: no public image exists. */
  image?: string;
  /** Nodes the LB pods may run on; default portable-lb.io/load-balancer=true. */
  nodeSelector?: Record<string, string>;
  /** TCP MD5 password for the BGP sessions; pass a Pulumi secret. */
  bgpPassword?: pulumi.Input<string>;
  /**
   * cloud-routes on AWS: route tables an environment made, whose ids exist only once they are
   * created; config.cloudRoutes then names none, and the config is written with these.
   */
  routeTableIds?: pulumi.Input<string[]>;
  /**
   * Where the nodes' container runtime keeps pods' network namespaces (with dataPlane.mode dsr the
   * node agent enters the backend pods' namespaces there); default /run/netns (containerd, CRI-O).
   */
  podNetnsDir?: string;
  /**
   * Adds pulumi.com/skipAwait to the workload, so `pulumi up` does not wait for pods to become
   * ready. Only for clusters without kubelets (our control-plane tests).
   */
  skipAwait?: boolean;
  /** How Prometheus finds the metrics (README, "Metrics"); default neither. */
  monitoring?: MonitoringArgs;
}

const argsSchema = z
  .object({
    replicas: z.number().int({ error: "must be a whole number" }).min(1, { error: "must be at least 1" }),
    lbNodeCount: z.number().int().min(0).optional(),
    image: lbImageRef,
    monitoring: monitoringSchema.optional(),
  })
  .superRefine((a, ctx) => {
    if (a.lbNodeCount !== undefined && a.replicas > a.lbNodeCount) {
      ctx.addIssue({
        code: "custom",
        path: ["replicas"],
        message: `${a.replicas} LB pods need ${a.replicas} LB nodes (one pod per node) but only ${a.lbNodeCount} are labelled; label more nodes or lower replicas`,
      });
    }
  });

export class LoadBalancer extends pulumi.ComponentResource {
  public readonly config: LbConfig;
  public readonly namespace: pulumi.Output<string>;
  public readonly loadBalancerClass: string;
  public readonly serviceAccount: k8s.core.v1.ServiceAccount;
  public readonly clusterRole: k8s.rbac.v1.ClusterRole;
  public readonly role: k8s.rbac.v1.Role;
  public readonly configMap: k8s.core.v1.ConfigMap;
  public readonly deployment: k8s.apps.v1.Deployment;
  public readonly priorityClass: k8s.scheduling.v1.PriorityClass;
  public readonly nodeAgent: NodeAgent;

  constructor(name: string, args: LoadBalancerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:LoadBalancer", name, {}, opts);
    const { image } = parseOrThrow(argsSchema, args, "loadBalancer");
    const tablesLater = args.routeTableIds !== undefined;
    const parsed = parseOrThrow(
      tablesLater ? lbConfigSchemaRouteTablesLater : lbConfigSchema,
      args.config,
      "loadBalancer.config",
    );
    if (tablesLater && (parsed.cloudRoutes?.cloud !== "aws" || parsed.cloudRoutes.routeTableIds))
      throw new ConfigError(
        "loadBalancer.routeTableIds: the environment's route tables are for cloud-routes on aws whose config names none; drop them or config.cloudRoutes.routeTableIds",
      );
    if (args.bgpPassword !== undefined && parsed.routingMode !== "bgp") {
      throw new ConfigError(
        `loadBalancer.bgpPassword: is set but routingMode is ${parsed.routingMode}; drop the password or use routingMode bgp`,
      );
    }
    const passwordSecretName = args.bgpPassword !== undefined ? `${NAME}-bgp` : undefined;
    this.config =
      passwordSecretName && parsed.bgp
        ? { ...parsed, bgp: { ...parsed.bgp, passwordFile: LB_PATHS.bgpPasswordFile } }
        : parsed;
    this.loadBalancerClass = this.config.loadBalancerClass;
    const labels = { ...LB_POD_LABELS };
    const child = { parent: this };

    const ns = new SystemNamespace(
      `${name}-namespace`,
      { name: args.namespace ?? DEFAULT_LB_NAMESPACE, component: "load-balancer", podSecurity: "privileged" },
      child,
    );
    this.namespace = ns.name;
    const inNs = { namespace: ns.name, labels };
    const cloudRoutes = parsed.routingMode === "cloud-routes";
    // DSR on the IPVS engine tunnels in IPIP: the node agents say which kernels cannot unwrap it.
    const ipipTunnel = parsed.dataPlane.mode === "dsr" && parsed.dataPlane.engine === "ipvs";

    ({ serviceAccount: this.serviceAccount, role: this.role } = serviceAccountWithRole(
      name,
      NAME,
      inNs,
      [...LB_NAMESPACE_RULES, ...(cloudRoutes || ipipTunnel ? LB_LEASE_WATCH_RULES : [])],
      child,
    ));
    this.clusterRole = clusterRoleFor(
      name,
      NAME,
      labels,
      [
        ...LB_CLUSTER_RULES,
        ...(cloudRoutes ? LB_CLOUD_ROUTES_CLUSTER_RULES : []),
        ...(parsed.dataPlane.mode === "dsr" ? LB_DSR_CLUSTER_RULES : []),
      ],
      { name: this.serviceAccount.metadata.name, namespace: ns.name },
      child,
    );
    // With an environment's route tables, the config is complete (and checked as the controller
    // checks it) once their ids exist.
    const config = this.config;
    const configJson = pulumi
      .output(args.routeTableIds)
      .apply((ids) =>
        JSON.stringify(
          ids === undefined
            ? config
            : parseOrThrow(
                lbConfigSchema,
                { ...config, cloudRoutes: { ...config.cloudRoutes!, routeTableIds: ids } },
                "loadBalancer.config",
              ),
          null,
          2,
        ),
      );
    this.configMap = new k8s.core.v1.ConfigMap(
      `${name}-config`,
      { metadata: { name: `${NAME}-config`, ...inNs }, data: { "config.json": configJson } },
      child,
    );
    if (passwordSecretName) {
      new k8s.core.v1.Secret(
        `${name}-bgp-password`,
        {
          metadata: { name: passwordSecretName, ...inNs },
          type: "Opaque",
          stringData: { password: pulumi.secret(args.bgpPassword!) },
        },
        child,
      );
    }
    this.priorityClass = new k8s.scheduling.v1.PriorityClass(
      `${name}-priority`,
      {
        metadata: { name: LB_PRIORITY_CLASS, labels },
        // Below system-node-critical (kubelet, CNI) but above every app: losing the LB loses all apps.
        value: 1_000_000_000,
        globalDefault: false,
        description: "portable-lb data plane (LB pods and route reflectors)",
      },
      child,
    );

    const nodeSelector = args.nodeSelector ?? DEFAULT_LB_NODE_SELECTOR;
    const configAnnotations = { [CONFIG_HASH_ANNOTATION]: configJson.apply(configHash) };
    const { ports } = this.config;
    const podSpec = lbPodSpec({
      config: this.config,
      image,
      serviceAccountName: NAME,
      priorityClassName: LB_PRIORITY_CLASS,
      nodeSelector,
      configMapName: `${NAME}-config`,
      ...(passwordSecretName && { bgpPasswordSecret: passwordSecretName }),
    });
    this.deployment = new k8s.apps.v1.Deployment(
      `${name}-deployment`,
      {
        metadata: {
          name: NAME,
          ...inNs,
          ...(args.skipAwait && { annotations: { "pulumi.com/skipAwait": "true" } }),
        },
        spec: {
          replicas: args.replicas,
          selector: { matchLabels: { app: LB_APP_LABEL } },
          // Replace one LB at a time, never surge: anti-affinity leaves no free LB node to surge onto.
          strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
          template: {
            metadata: {
              labels,
              annotations: { ...configAnnotations, ...scrapeAnnotations(args.monitoring, ports.metrics) },
            },
            spec: podSpec,
          },
        },
      },
      { ...child, dependsOn: [this.configMap, this.priorityClass] },
    );
    new k8s.policy.v1.PodDisruptionBudget(
      `${name}-pdb`,
      {
        metadata: { name: NAME, ...inNs },
        spec: { maxUnavailable: 1, selector: { matchLabels: { app: LB_APP_LABEL } } },
      },
      child,
    );

    this.nodeAgent = new NodeAgent(
      `${name}-node-agent`,
      {
        namespace: ns.name,
        config: this.config,
        configMapName: `${NAME}-config`,
        podAnnotations: { ...configAnnotations, ...scrapeAnnotations(args.monitoring, ports.nodeAgent) },
        image,
        nodeSelector,
        priorityClassName: LB_PRIORITY_CLASS,
        ...(this.config.dataPlane.mode === "dsr" && {
          dsr: { netnsDir: args.podNetnsDir ?? DEFAULT_POD_NETNS_DIR },
        }),
        ...(args.skipAwait && { skipAwait: true }),
      },
      { ...child, dependsOn: [this.configMap, this.priorityClass] },
    );

    if (args.monitoring?.podMonitors) {
      const targets: ScrapeTarget[] = [
        { name: NAME, selector: { app: LB_APP_LABEL }, portName: "metrics" },
        // The node agent serves /metrics beside its probes, on its one port.
        { name: NODE_AGENT_NAME, selector: { app: NODE_AGENT_NAME }, portName: "health" },
      ];
      new PodMonitors(
        `${name}-pod-monitors`,
        {
          namespace: ns.name,
          targets,
          ...(args.monitoring.podMonitorLabels && { labels: args.monitoring.podMonitorLabels }),
        },
        { ...child, dependsOn: [this.deployment, this.nodeAgent] },
      );
    }

    this.registerOutputs({ namespace: this.namespace, loadBalancerClass: this.loadBalancerClass });
  }
}
