// The one validation pass over everything PortableCluster is given: every section is checked, then
// every check across sections whose inputs are valid, and all problems are reported together with
// the user's own paths, before a single resource is registered. A failed preview plans nothing, and
// a failed `pulumi up` leaves no half-built platform.
import type * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { asn, bfdSchema, bgpTimersSchema } from "../config/bgpSettings.ts";
import { cidrContains } from "../config/cidr.ts";
import {
  checkDrain,
  checkForwarding,
  dataPlaneSchema,
  drainSchema,
  gracefulRestartS,
  lbCloudRoutesSchema,
  lbCloudRoutesSchemaRouteTablesLater,
  loadBalancerClassSchema,
} from "../config/lbConfig.ts";
import { LB_IMAGE_FIX, lbImageRef } from "../config/lbImageRef.ts";
import { imageRepositorySchema } from "../config/imageRepository.ts";
import { monitoringSchema } from "../config/monitoring.ts";
import type { ClusterEnvironment, EnvironmentRouteTargets, RouteTargetFacts } from "../environment.ts";
import { flannelBackendConf, resolveFlannelBackend } from "../flannel/flannelBackend.ts";
import { reflectorsSchema } from "../routeReflector/routeReflector.ts";
import { ConfigError, collect, collectParsed, problem } from "../validation.ts";
import { networkPlanSchema, type NetworkPlan } from "./networkPlan.ts";
import { resolveRoutingMode, type RoutingMode } from "./routingMode.ts";

export const ROUTING_CHOICES = ["auto", "bgp", "cloud-routes"] as const;

/** What the checks need to know of the environment: not how to reach it. */
export type EnvironmentFacts = Pick<
  ClusterEnvironment,
  "platform" | "bgp" | "lbNodeCount" | "lbImage" | "defaultRouteReflectors" | "vipSourcedRepliesDropped"
> & {
  cloudRoutes?: RouteTargetFacts | EnvironmentRouteTargets;
};

export const flannelInputSchema = z.strictObject({
  /** Checked against the platform after the pass (resolveFlannelBackend). */
  backend: z.string().optional(),
  vxlan: z
    .strictObject({
      vni: z.number().int().min(1).max(0xffffff).optional(),
      port: z.number().int().min(1).max(65535).optional(),
    })
    .optional(),
  version: z.string().min(1).optional(),
  /** Mirrors for flanneld's and its CNI plugin's images (air-gapped sites); the tags stay the versions'. */
  images: z
    .strictObject({
      repository: imageRepositorySchema.optional(),
      cniPluginRepository: imageRepositorySchema.optional(),
    })
    .optional(),
  cniPluginVersion: z.string().min(1).optional(),
  /** False: the machines' own CNI configuration gives pods their addresses; flannel only routes. */
  installCni: z.boolean().optional(),
});

export const loadBalancerInputSchema = z
  .strictObject({
    replicas: z.number().int().min(1).max(100),
    image: lbImageRef.optional(),
    nodeSelector: z.record(z.string(), z.string()).optional(),
    loadBalancerClass: loadBalancerClassSchema.optional(),
    serveClassless: z.boolean().optional(),
    dataPlane: dataPlaneSchema.optional(),
    bgp: z
      .strictObject({
        asn: asn.optional(),
        password: z.custom<pulumi.Input<string>>((v) => v !== null).optional(),
        bfd: bfdSchema.optional(),
        timers: bgpTimersSchema.optional(),
        gracefulRestartS: gracefulRestartS.optional(),
        // BIRD merges at most 255 paths (FRR allows 256): the snippet must work on both.
        maximumPaths: z.number().int().min(1).max(255).optional(),
      })
      .optional(),
    routeReflectors: reflectorsSchema.optional(),
    // Checked with the environment's cloud below (cloud-routes mode): `cloud` may be left out.
    cloudRoutes: z.looseObject({}).optional(),
    drain: drainSchema.optional(),
    monitoring: monitoringSchema.optional(),
  })
  .superRefine((lb, ctx) => {
    if (lb.drain) checkDrain(lb.dataPlane?.engine ?? "auto", lb.drain, ctx, ["drain"]);
    // The routing mode comes from the environment: checked with it in the LB's own config.
    if (lb.dataPlane) checkForwarding(lb.dataPlane, undefined, ctx, ["dataPlane", "mode"]);
  });

export type FlannelInput = z.input<typeof flannelInputSchema>;
export type LoadBalancerInput = z.input<typeof loadBalancerInputSchema>;

/** The sections of PortableClusterArgs the pass checks (the environment is resolved before). */
export interface ClusterInput {
  network: unknown;
  flannel?: unknown;
  routing?: unknown;
  loadBalancer: unknown;
}

export interface CheckedClusterInput {
  network: NetworkPlan;
  flannel: z.output<typeof flannelInputSchema>;
  routingMode: RoutingMode;
  loadBalancer: z.output<typeof loadBalancerInputSchema>;
  /** BGP mode: the reflectors, checked against the node network. */
  routeReflectors: { node: string; address: string }[];
  image: string;
  /** cloud-routes mode: the settings, with the environment's cloud (and its GCP network). */
  cloudRoutes?: z.input<typeof lbCloudRoutesSchema>;
  /** cloud-routes on AWS: the route tables the environment made, when the settings name none. */
  routeTablesLater?: boolean;
}

/**
 * Every problem with `input` in `env`, in the order the user writes the sections; none when valid.
 * Without `env` (the environment's own settings are wrong) only what needs no environment is checked.
 */
export function clusterInputProblems(input: ClusterInput, env: EnvironmentFacts | undefined): string[] {
  return checkAll(input, env).problems;
}

/** The checked input, or one ConfigError listing every problem. */
export function checkClusterInput(input: ClusterInput, env: EnvironmentFacts): CheckedClusterInput {
  const { checked, problems } = checkAll(input, env);
  if (!checked) throw new ConfigError(problems);
  return checked;
}

function checkAll(
  input: ClusterInput,
  env: EnvironmentFacts | undefined,
): { checked?: CheckedClusterInput; problems: string[] } {
  const problems: string[] = [];
  const network = collectParsed(problems, networkPlanSchema, input.network, "network");
  const flannel = collectParsed(problems, flannelInputSchema, input.flannel ?? {}, "flannel");
  const routing = collectParsed(problems, z.enum(ROUTING_CHOICES), input.routing ?? "auto", "routing");
  const lb = collectParsed(problems, loadBalancerInputSchema, input.loadBalancer, "loadBalancer");

  if (!env) return { problems };
  // Checks across sections, each on the parts that passed their own.
  if (flannel) {
    const backend = collect(problems, () => resolveFlannelBackend(env.platform, flannel.backend));
    if (backend) collect(problems, () => flannelBackendConf(backend, flannel.vxlan));
  }
  const routingMode = routing && collect(problems, () => resolveRoutingMode(routing, env));
  // These need one field only: taken as written when another field of the section is wrong.
  const written = (input.loadBalancer ?? {}) as { replicas?: unknown; image?: unknown };
  const image = lb?.image ?? (typeof written.image === "string" ? written.image : env.lbImage);
  if (image === undefined && written.image === undefined)
    problems.push(
      problem("loadBalancer.image", `is required, as no public LB image exists; ${LB_IMAGE_FIX}`, undefined),
    );
  const replicas =
    lb?.replicas ?? (Number.isInteger(written.replicas) ? (written.replicas as number) : undefined);
  if (replicas !== undefined && env.lbNodeCount !== undefined && replicas > env.lbNodeCount)
    problems.push(
      problem(
        "loadBalancer.replicas",
        `${replicas} LB pods need ${replicas} LB nodes (one pod per node) but only ${env.lbNodeCount} are labelled; label more nodes or lower replicas`,
        replicas,
      ),
    );
  // The user's, else the nodes the environment made for them.
  const reflectors = lb?.routeReflectors ?? env.defaultRouteReflectors ?? [];
  if (lb && routingMode === "bgp") {
    if (lb.bgp?.asn === undefined)
      problems.push(
        problem(
          "loadBalancer.bgp.asn",
          "is required for bgp routing; use a private ASN in 64512-65534 or 4200000000-4294967294",
          undefined,
        ),
      );
    if (!reflectors.length)
      problems.push(
        problem(
          "loadBalancer.routeReflectors",
          env.defaultRouteReflectors
            ? "bgp routing needs at least one route reflector, and the environment has no worker node to run one on; add workers or name the nodes, e.g. [{ node: 'rr1', address: '10.0.0.5' }]"
            : "bgp routing needs at least one route reflector (two for redundancy), e.g. [{ node: 'rr1', address: '10.0.0.5' }]",
          undefined,
        ),
      );
    // The upstream router sits on the node network and must reach every reflector directly.
    if (network)
      reflectors.forEach((rr, i) => {
        if (!cidrContains(network.nodeCidr, rr.address))
          problems.push(
            `loadBalancer.routeReflectors[${i}].address: is outside network.nodeCidr ${network.nodeCidr}, so the upstream router cannot reach it (got "${rr.address}"); use the node's address on the node network`,
          );
      });
  }
  if (lb?.dataPlane?.mode === "dsr" && env.vipSourcedRepliesDropped)
    problems.push(
      problem(
        "loadBalancer.dataPlane.mode",
        `dsr cannot work here: ${env.vipSourcedRepliesDropped}; use snat`,
        "dsr",
      ),
    );
  const cloudRoutes = lb && routingMode && checkCloudRoutes(problems, routingMode, env, lb.cloudRoutes);
  if (problems.length || !network || !flannel || !routingMode || !lb || image === undefined)
    return { problems };
  return {
    checked: {
      network,
      flannel,
      routingMode,
      loadBalancer: lb,
      routeReflectors: reflectors,
      image,
      ...(cloudRoutes && { cloudRoutes: cloudRoutes.settings }),
      ...(cloudRoutes?.routeTablesLater && { routeTablesLater: true }),
    },
    problems,
  };
}

/**
 * The cloud-routes settings with the environment's cloud, checked here so that what each cloud needs
 * (AWS route tables, GCP's project and network) fails at preview under the field the user sets.
 * What the environment made itself fills in what the user left out: its GCP network, and AWS route
 * tables whose ids come once they exist.
 */
function checkCloudRoutes(
  problems: string[],
  routingMode: RoutingMode,
  env: EnvironmentFacts,
  given: Record<string, unknown> | undefined,
): { settings: z.input<typeof lbCloudRoutesSchema>; routeTablesLater: boolean } | undefined {
  if (routingMode !== "cloud-routes") {
    if (given)
      problems.push(
        problem(
          "loadBalancer.cloudRoutes",
          `applies to routing cloud-routes only, and this stack routes with ${routingMode}; remove it`,
          undefined,
        ),
      );
    return undefined;
  }
  const cloud = env.platform as "aws" | "gcp";
  if (given?.cloud !== undefined && given.cloud !== cloud) {
    problems.push(
      `loadBalancer.cloudRoutes.cloud: must match the environment's platform ${cloud} (got ${JSON.stringify(given.cloud)}); drop it or set it to "${cloud}"`,
    );
    return undefined;
  }
  const made = env.cloudRoutes;
  const settings = {
    ...(made?.cloud === "gcp" && { project: made.project, network: made.network }),
    ...given,
    cloud,
  };
  const routeTablesLater = made?.cloud === "aws" && given?.routeTableIds === undefined;
  const schema = routeTablesLater ? lbCloudRoutesSchemaRouteTablesLater : lbCloudRoutesSchema;
  return (
    collectParsed(problems, schema, settings, "loadBalancer.cloudRoutes") && { settings, routeTablesLater }
  );
}
