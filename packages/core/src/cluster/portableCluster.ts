// The top-level component: one environment description in, a working platform out. It talks to the
// cluster through a Kubernetes provider made from the environment's kubeconfig and, once the whole
// input has passed one check (clusterInput.ts), creates in order Flannel, the LoadBalancer and (in
// BGP mode) the RouteReflectors.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { renderUpstreamRouterFrr, routerAdvice } from "../bgp/index.ts";
import type { bfdSchema, bgpTimersSchema } from "../config/bgpSettings.ts";
import type { DATA_PLANES, FORWARDING_MODES, SCHEDULERS, lbCloudRoutesSchema } from "../config/lbConfig.ts";
import { DEFAULT_LOAD_BALANCER_CLASS, type LbConfigInput } from "../config/lbConfig.ts";
import type { VipPool } from "../config/vipPool.ts";
import type { ClusterEnvironment } from "../environment.ts";
import { Flannel, type FlannelArgs } from "../flannel/flannel.ts";
import { LoadBalancer } from "../loadBalancer/loadBalancer.ts";
import type { MonitoringArgs } from "../config/monitoring.ts";
import { RouteReflector } from "../routeReflector/routeReflector.ts";
import { checkClusterInput } from "./clusterInput.ts";
import type { NetworkPlanInput } from "./networkPlan.ts";
import type { RoutingChoice, RoutingMode } from "./routingMode.ts";

export interface PortableClusterArgs {
  environment: ClusterEnvironment;
  network: NetworkPlanInput;
  flannel?: Pick<FlannelArgs, "backend" | "vxlan" | "version" | "cniPluginVersion" | "images" | "installCni">;
  /** "auto" (default): BGP where the environment has peering, else the cloud's route table. */
  routing?: RoutingChoice;
  loadBalancer: {
    replicas: number;
    /** The LB image; required unless the environment provides one (the lab). */
    image?: string;
    nodeSelector?: Record<string, string>;
    loadBalancerClass?: string;
    /**
     * Serve LoadBalancer Services without spec.loadBalancerClass too, as the cluster's default load
     * balancer (a plain `kubectl expose --type=LoadBalancer`, Helm charts). Default: the
     * environment's (on where it made the cluster: lab, onprem, aws, gcp; off on an existing one).
     */
    serveClassless?: boolean;
    dataPlane?: {
      engine?: (typeof DATA_PLANES)[number];
      mode?: (typeof FORWARDING_MODES)[number];
      scheduler?: (typeof SCHEDULERS)[number];
    };
    /** BGP mode: the iBGP AS, timers and the session password (a Pulumi secret). */
    bgp?: {
      asn: number;
      password?: pulumi.Input<string>;
      bfd?: Partial<z.input<typeof bfdSchema>>;
      timers?: Partial<z.input<typeof bgpTimersSchema>>;
      gracefulRestartS?: number;
      /** ECMP fan-out the router config asks for; default 16. */
      maximumPaths?: number;
    };
    /** BGP mode: where the route reflectors run (node and its router-reachable address). */
    routeReflectors?: { node: string; address: string }[];
    /** cloud-routes mode; `cloud` defaults to the environment's platform. */
    cloudRoutes?: Omit<z.input<typeof lbCloudRoutesSchema>, "cloud"> & { cloud?: "aws" | "gcp" };
    /** How a stopping LB pod serves on after its withdrawal; the pod's grace period follows it. */
    drain?: LbConfigInput["drain"];
    /** How Prometheus finds the metrics: scrape annotations or PodMonitors (README, "Metrics"). */
    monitoring?: MonitoringArgs;
  };
  /** See LoadBalancerArgs.skipAwait. */
  skipAwait?: boolean;
}

export class PortableCluster extends pulumi.ComponentResource {
  public readonly kubeconfig: pulumi.Output<string>;
  public readonly loadBalancerClass: string;
  public readonly vipPools: VipPool[];
  public readonly routingMode: RoutingMode;
  /** BGP mode: an FRR configuration for the upstream router, ready to paste. */
  public readonly routerConfig?: pulumi.Output<string>;
  /** BGP mode: the one thing to set on a Linux router for ECMP to spread flows. */
  public readonly routerAdvice?: string;
  public readonly provider: k8s.Provider;
  public readonly flannel: Flannel;
  public readonly loadBalancer: LoadBalancer;
  public readonly routeReflector?: RouteReflector;

  constructor(name: string, args: PortableClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    // The whole input is checked before anything registers, this component included.
    const env = args.environment;
    const checked = checkClusterInput(args, env);
    super("portable-lb:core:PortableCluster", name, {}, opts);
    const { network, image, routeReflectors: reflectors } = checked;
    this.routingMode = checked.routingMode;
    this.vipPools = network.vipPools;
    const lbArgs = args.loadBalancer;
    const bgp = this.routingMode === "bgp";
    const bgpArgs = bgp
      ? { asn: checked.loadBalancer.bgp!.asn!, maximumPaths: checked.loadBalancer.bgp?.maximumPaths ?? 16 }
      : undefined;

    this.kubeconfig = pulumi.secret(pulumi.output(env.kubeconfig));
    this.provider = new k8s.Provider(
      `${name}-k8s`,
      {
        kubeconfig: this.kubeconfig,
        ...(env.deleteUnreachable && { deleteUnreachable: true }),
        ...(env.clusterIdentifier && { clusterIdentifier: env.clusterIdentifier }),
      },
      { parent: this, ...(env.dependsOn && { dependsOn: env.dependsOn }) },
    );
    const child = { parent: this, provider: this.provider };

    this.flannel = new Flannel(
      `${name}-flannel`,
      {
        platform: env.platform,
        podCidr: network.podCidr,
        ...(checked.flannel.backend !== undefined && { backend: checked.flannel.backend }),
        ...(checked.flannel.vxlan && { vxlan: checked.flannel.vxlan }),
        ...(checked.flannel.version && { version: checked.flannel.version }),
        ...(checked.flannel.cniPluginVersion && { cniPluginVersion: checked.flannel.cniPluginVersion }),
        ...(checked.flannel.images && { images: checked.flannel.images }),
        ...(checked.flannel.installCni !== undefined && { installCni: checked.flannel.installCni }),
        ...(env.flannelImage && { image: env.flannelImage }),
        ...(args.skipAwait && { skipAwait: true }),
      },
      child,
    );

    const lbConfig: LbConfigInput = {
      loadBalancerClass: lbArgs.loadBalancerClass ?? DEFAULT_LOAD_BALANCER_CLASS,
      serveClassless: lbArgs.serveClassless ?? env.servesClasslessByDefault ?? false,
      routingMode: this.routingMode,
      podCidr: network.podCidr,
      vipPools: network.vipPools,
      ...((lbArgs.dataPlane || env.defaultForwarding) && {
        dataPlane: {
          ...lbArgs.dataPlane,
          // DSR's replies leave backend nodes from the VIP: only with BGP, never a cloud's route table.
          mode:
            lbArgs.dataPlane?.mode ??
            (this.routingMode === "bgp" ? (env.defaultForwarding ?? "snat") : "snat"),
        },
      }),
      ...(lbArgs.drain && { drain: lbArgs.drain }),
      ...(bgpArgs && {
        bgp: {
          asn: bgpArgs.asn,
          routeReflectors: reflectors.map((r) => r.address),
          ...(lbArgs.bgp?.bfd && { bfd: lbArgs.bgp.bfd }),
          ...(lbArgs.bgp?.timers && { timers: lbArgs.bgp.timers }),
          ...(lbArgs.bgp?.gracefulRestartS !== undefined && {
            gracefulRestartS: lbArgs.bgp.gracefulRestartS,
          }),
        },
      }),
      ...(checked.cloudRoutes && { cloudRoutes: checked.cloudRoutes }),
    };
    this.loadBalancer = new LoadBalancer(
      `${name}-lb`,
      {
        config: lbConfig,
        replicas: lbArgs.replicas,
        ...(env.lbNodeCount !== undefined && { lbNodeCount: env.lbNodeCount }),
        image,
        ...(lbArgs.nodeSelector && { nodeSelector: lbArgs.nodeSelector }),
        ...(bgp && lbArgs.bgp?.password !== undefined && { bgpPassword: lbArgs.bgp.password }),
        // The AWS route tables the environment made: written into the LB's config once they exist.
        ...(checked.routeTablesLater &&
          env.cloudRoutes?.cloud === "aws" && { routeTableIds: env.cloudRoutes.routeTableIds }),
        ...(env.podNetnsDir !== undefined && { podNetnsDir: env.podNetnsDir }),
        ...(args.skipAwait && { skipAwait: true }),
        ...(lbArgs.monitoring && { monitoring: lbArgs.monitoring }),
      },
      // LB pods need pod networking: flannel first.
      { ...child, dependsOn: [this.flannel] },
    );
    this.loadBalancerClass = this.loadBalancer.loadBalancerClass;

    if (bgpArgs) {
      const lbBgp = this.loadBalancer.config.bgp!;
      this.routeReflector = new RouteReflector(
        `${name}-rr`,
        {
          namespace: this.loadBalancer.namespace,
          asn: bgpArgs.asn,
          reflectors,
          // Speakers connect to the reflectors' node addresses. From another node, flannel
          // masquerades pod-to-node traffic to that node's address (one LB pod per node, so still
          // one address per speaker); from the reflector's own node it arrives from the pod.
          speakerRanges: [network.podCidr, network.nodeCidr],
          vipPrefixes: network.vipPools.map((p) => p.cidr),
          upstreamRouters: env.bgp!.routers,
          bfd: lbBgp.bfd,
          timers: lbBgp.timers,
          gracefulRestartS: lbBgp.gracefulRestartS,
          ...(lbArgs.bgp?.password !== undefined && { password: lbArgs.bgp.password }),
          image,
          ...(args.skipAwait && { skipAwait: true }),
        },
        { ...child, dependsOn: [this.flannel, this.loadBalancer] },
      );
      const routerConfig = pulumi.all([lbArgs.bgp?.password]).apply(([password]) =>
        renderUpstreamRouterFrr({
          asn: bgpArgs.asn,
          routerId: env.bgp!.routerId ?? env.bgp!.routers[0]!,
          ...(env.bgp!.platformName !== undefined && { platformName: env.bgp!.platformName }),
          routeReflectors: reflectors.map((r) => r.address),
          maximumPaths: bgpArgs.maximumPaths,
          bfd: lbBgp.bfd,
          timers: lbBgp.timers,
          ...(password !== undefined && { password }),
        }),
      );
      this.routerConfig = lbArgs.bgp?.password !== undefined ? pulumi.secret(routerConfig) : routerConfig;
      this.routerAdvice = routerAdvice(this.loadBalancer.config.dataPlane.mode);
    }

    this.registerOutputs(this.stackOutputs());
  }

  /**
   * What a platform stack exports for its app stacks (they read it through a StackReference); the
   * router's config and advice only in BGP mode (Pulumi warns about each undefined output).
   */
  stackOutputs() {
    return {
      kubeconfig: this.kubeconfig,
      loadBalancerClass: this.loadBalancerClass,
      vipPools: this.vipPools,
      routingMode: this.routingMode,
      ...(this.routerConfig && { routerConfig: this.routerConfig, routerAdvice: this.routerAdvice }),
    };
  }
}
