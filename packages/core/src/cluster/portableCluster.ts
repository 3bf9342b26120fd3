// The top-level component: one environment description in, a working platform out. It talks to the
// cluster through a Kubernetes provider made from the environment's kubeconfig and creates, in
// order, Flannel, the LoadBalancer and (in BGP mode) the RouteReflectors.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { MULTIPATH_HASH_ADVICE, renderUpstreamRouterFrr } from "../bgp/index.ts";
import type { bfdSchema, bgpTimersSchema } from "../config/bgpSettings.ts";
import { asn } from "../config/bgpSettings.ts";
import { cidrContains } from "../config/cidr.ts";
import type { DATA_PLANES, SCHEDULERS } from "../config/lbConfig.ts";
import { DEFAULT_LOAD_BALANCER_CLASS, lbCloudRoutesSchema, type LbConfigInput } from "../config/lbConfig.ts";
import type { VipPool } from "../config/vipPool.ts";
import type { ClusterEnvironment } from "../environment.ts";
import { Flannel } from "../flannel/flannel.ts";
import type { VxlanOptions } from "../flannel/flannelBackend.ts";
import { LoadBalancer } from "../loadBalancer/loadBalancer.ts";
import { RouteReflector, reflectorsSchema } from "../routeReflector/routeReflector.ts";
import { ConfigError, parseOrThrow } from "../validation.ts";
import { networkPlanSchema, type NetworkPlanInput } from "./networkPlan.ts";
import { resolveRoutingMode, type RoutingChoice, type RoutingMode } from "./routingMode.ts";

export interface PortableClusterArgs {
  environment: ClusterEnvironment;
  network: NetworkPlanInput;
  flannel?: { backend?: string; vxlan?: VxlanOptions; version?: string };
  /** "auto" (default): BGP where the environment has peering, else the cloud's route table. */
  routing?: RoutingChoice;
  loadBalancer: {
    replicas: number;
    /** The LB image; required unless the environment provides one (the lab). */
    image?: string;
    nodeSelector?: Record<string, string>;
    loadBalancerClass?: string;
    dataPlane?: { mode?: (typeof DATA_PLANES)[number]; scheduler?: (typeof SCHEDULERS)[number] };
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
    /** Cloud routes: AWS needs routeTableIds, GCP project and network; cloud is the platform's. */
    cloudRoutes?: CloudRoutesArgs;
    /** How a stopping LB pod serves on after its withdrawal; the pod's grace period follows it. */
    drain?: LbConfigInput["drain"];
  };
  /** See LoadBalancerArgs.skipAwait. */
  skipAwait?: boolean;
}

type CloudRoutesArgs = Omit<z.input<typeof lbCloudRoutesSchema>, "cloud"> & { cloud?: "aws" | "gcp" };

const bgpArgsSchema = z.object({
  asn,
  // BIRD merges at most 255 paths (FRR allows 256): the snippet must work on both.
  maximumPaths: z.number().int().min(1).max(255).default(16),
});

/**
 * The cloud-routes settings, checked here so that what is missing (AWS route tables, GCP's project
 * and network) fails at preview under the field the user sets, with the environment's cloud.
 */
function cloudRoutesFor(
  env: ClusterEnvironment,
  given: CloudRoutesArgs | undefined,
): z.input<typeof lbCloudRoutesSchema> {
  const cloud = env.platform as "aws" | "gcp";
  if (given?.cloud !== undefined && given.cloud !== cloud)
    throw new ConfigError(
      `loadBalancer.cloudRoutes.cloud: must match the environment's platform ${cloud} (got ${JSON.stringify(given.cloud)}); drop it or set it to "${cloud}"`,
    );
  const settings = { ...given, cloud };
  parseOrThrow(lbCloudRoutesSchema, settings, "loadBalancer.cloudRoutes");
  return settings;
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
    super("portable-lb:core:PortableCluster", name, {}, opts);
    const env = args.environment;
    const network = parseOrThrow(networkPlanSchema, args.network, "network");
    const routing = parseOrThrow(
      z.enum(["auto", "bgp", "cloud-routes"], { error: "must be one of: auto, bgp, cloud-routes" }),
      args.routing ?? "auto",
      "routing",
    );
    this.routingMode = resolveRoutingMode(routing, env);
    this.vipPools = network.vipPools;
    const lbArgs = args.loadBalancer;
    const image = lbArgs.image ?? env.lbImage;
    const bgp = this.routingMode === "bgp";
    const bgpArgs = bgp ? parseOrThrow(bgpArgsSchema, lbArgs.bgp ?? {}, "loadBalancer.bgp") : undefined;
    const reflectors = bgp
      ? parseOrThrow(reflectorsSchema, lbArgs.routeReflectors ?? [], "loadBalancer.routeReflectors")
      : [];
    reflectors.forEach((rr, i) => {
      // The upstream router sits on the node network and must reach every reflector directly.
      if (!cidrContains(network.nodeCidr, rr.address))
        throw new ConfigError(
          `loadBalancer.routeReflectors[${i}].address: is outside network.nodeCidr ${network.nodeCidr}, so the upstream router cannot reach it (got "${rr.address}"); use the node's address on the node network`,
        );
    });

    this.kubeconfig = pulumi.secret(pulumi.output(env.kubeconfig));
    this.provider = new k8s.Provider(`${name}-k8s`, { kubeconfig: this.kubeconfig }, { parent: this });
    const child = { parent: this, provider: this.provider };

    this.flannel = new Flannel(
      `${name}-flannel`,
      {
        platform: env.platform,
        podCidr: network.podCidr,
        ...(args.flannel?.backend !== undefined && { backend: args.flannel.backend }),
        ...(args.flannel?.vxlan && { vxlan: args.flannel.vxlan }),
        ...(args.flannel?.version && { version: args.flannel.version }),
        ...(args.skipAwait && { skipAwait: true }),
      },
      child,
    );

    const lbConfig: LbConfigInput = {
      loadBalancerClass: lbArgs.loadBalancerClass ?? DEFAULT_LOAD_BALANCER_CLASS,
      routingMode: this.routingMode,
      podCidr: network.podCidr,
      vipPools: network.vipPools,
      ...(lbArgs.dataPlane && { dataPlane: lbArgs.dataPlane }),
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
      ...(!bgp && { cloudRoutes: cloudRoutesFor(env, lbArgs.cloudRoutes) }),
    };
    this.loadBalancer = new LoadBalancer(
      `${name}-lb`,
      {
        config: lbConfig,
        replicas: lbArgs.replicas,
        ...(env.lbNodeCount !== undefined && { lbNodeCount: env.lbNodeCount }),
        ...(image !== undefined && { image }),
        ...(lbArgs.nodeSelector && { nodeSelector: lbArgs.nodeSelector }),
        ...(bgp && lbArgs.bgp?.password !== undefined && { bgpPassword: lbArgs.bgp.password }),
        ...(args.skipAwait && { skipAwait: true }),
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
          ...(image !== undefined && { image }),
          ...(args.skipAwait && { skipAwait: true }),
        },
        { ...child, dependsOn: [this.flannel, this.loadBalancer] },
      );
      const routerConfig = pulumi.all([lbArgs.bgp?.password]).apply(([password]) =>
        renderUpstreamRouterFrr({
          asn: bgpArgs.asn,
          routerId: env.bgp!.routers[0]!,
          routeReflectors: reflectors.map((r) => r.address),
          maximumPaths: bgpArgs.maximumPaths,
          bfd: lbBgp.bfd,
          timers: lbBgp.timers,
          ...(password !== undefined && { password }),
        }),
      );
      this.routerConfig = lbArgs.bgp?.password !== undefined ? pulumi.secret(routerConfig) : routerConfig;
      this.routerAdvice = MULTIPATH_HASH_ADVICE;
    }

    this.registerOutputs({
      kubeconfig: this.kubeconfig,
      loadBalancerClass: this.loadBalancerClass,
      vipPools: this.vipPools,
      routingMode: this.routingMode,
      routerConfig: this.routerConfig,
      routerAdvice: this.routerAdvice,
    });
  }
}
