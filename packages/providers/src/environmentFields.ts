// Fields the environment kinds share, so each is spelled, bounded and explained once.
import { ipv4Address, ipv4Cidr } from "@portable-lb/core";
import { z } from "zod";

/** The upstream routers that peer with our route reflectors, when the network offers BGP. */
export const bgpPeersSchema = z.strictObject({
  routers: z.array(ipv4Address).min(1, { error: "needs at least one router address" }),
});

/** Prefix of every machine and cloud resource name, and of the Kubernetes node names. */
export const clusterNameSchema = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,19}$/, {
    error: "must be 1-20 characters of a-z, 0-9 and '-', starting with a letter, e.g. plb",
  })
  .default("plb");

/** How many machines of each role a cloud environment creates (one control plane besides). */
export const cloudNodeCountsSchema = z
  .strictObject({
    /** Nodes that carry the LB label and run one LB pod each. */
    lb: z.number().int().min(1).max(20).default(2),
    /** Nodes for the apps (and, in BGP mode, the route reflectors). */
    workers: z.number().int().min(0).max(50).default(2),
  })
  .prefault({});

/** Whether LB nodes are tainted so that only the LB pods and node agents run there. */
export const lbTaintSchema = z.boolean().default(false);

const port = z.number().int().min(1).max(65535);

/**
 * Who reaches a cloud cluster from outside: the API server only from the listed ranges (where pulumi
 * and kubectl run), the VIPs' ports from `vipAccessCidrs`. Nothing else is open to the outside.
 */
export const cloudAccessShape = {
  apiAccessCidrs: z
    .array(
      ipv4Cidr.refine((cidr) => !cidr.endsWith("/0"), {
        error:
          "would open the Kubernetes API to the whole internet; list the ranges pulumi and kubectl run from, e.g. 203.0.113.0/24",
      }),
    )
    .min(1, {
      error: 'needs the ranges pulumi and kubectl reach the API server from, e.g. ["203.0.113.0/24"]',
    }),
  /** The ports the VIPs serve, opened on the LB nodes to `vipAccessCidrs`. */
  vipPorts: z.array(port).min(1).default([80, 443]),
  vipAccessCidrs: z.array(ipv4Cidr).min(1).default(["0.0.0.0/0"]),
};

/**
 * Each zone must lie in the region (`zoneOf(region, "a")` is the cloud's spelling) and appear once;
 * checked only when the region itself is well formed, so one mistake is reported once.
 */
export function checkZones(
  ctx: z.RefinementCtx,
  region: string,
  regionPattern: RegExp,
  zones: readonly string[],
  zoneOf: (region: string, letter: string) => string,
): void {
  if (!regionPattern.test(region)) return;
  const pattern = new RegExp(`^${zoneOf(region, "[a-z]")}$`);
  zones.forEach((zone, i) => {
    if (!pattern.test(zone))
      ctx.addIssue({
        code: "custom",
        path: ["zones", i],
        message: `must be a zone of region ${region}, like ${zoneOf(region, "a")}`,
      });
    else if (zones.indexOf(zone) < i)
      ctx.addIssue({ code: "custom", path: ["zones", i], message: "is listed twice; list each zone once" });
  });
}

/** What aws and gcp environments share besides their cloud's own names. */
export const cloudEnvironmentShape = {
  name: clusterNameSchema,
  nodes: cloudNodeCountsSchema,
  ...cloudAccessShape,
  /** Routers to peer with (BGP routing); without them VIPs are routed through the cloud's routes. */
  bgp: bgpPeersSchema.optional(),
  lbTaint: lbTaintSchema,
};
