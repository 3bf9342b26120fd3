// The load balancer's configuration: rendered by the LoadBalancer component into a ConfigMap and
// parsed by the controller in lb-image with this same schema, so the two cannot drift.
// Keep this module free of Pulumi imports: the controller image loads it.
import { z } from "zod";
import { asn, bfdSchema, bgpTimersSchema } from "./bgpSettings.ts";
import { cidrsOverlap, ipv4Address, ipv4Cidr, isIpv4Cidr } from "./cidr.ts";
import { checkPoolsDistinct, vipPoolSchema } from "./vipPool.ts";

export const DEFAULT_LOAD_BALANCER_CLASS = "portable-lb.io/ecmp";
export const ROUTING_MODES = ["bgp", "cloud-routes"] as const;
export const SCHEDULERS = ["mh", "rr", "wrr", "lc"] as const;
export const DATA_PLANES = ["auto", "ipvs", "nftables"] as const;
/** How flows reach backends: direct server return, or through the LB (source NAT). */
export const FORWARDING_MODES = ["dsr", "snat"] as const;
export const FAST_PATH_MODES = ["auto", "off"] as const;

/** How often the kernel refreshes the IPVS counters the drain watches. */
export const IPVS_COUNTER_LAG_S = 2;

const port = z.number().int().min(1).max(65535);

/** How long peers keep our routes while a speaker restarts (BGP graceful restart, 12 bits). */
export const gracefulRestartS = z.number().int().min(0).max(4095);

export const loadBalancerClassSchema = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, {
    error: "must be a domain-prefixed name like portable-lb.io/ecmp",
  });

export const dataPlaneSchema = z.strictObject({
  engine: z.enum(DATA_PLANES).default("auto"),
  // SNAT where nothing else is said: an environment may default to DSR (ClusterEnvironment).
  mode: z
    .enum(FORWARDING_MODES, {
      error: (issue) =>
        (DATA_PLANES as readonly unknown[]).includes(issue.input)
          ? "must be dsr or snat; the engine (auto, ipvs, nftables) is set in dataPlane.engine"
          : "must be dsr or snat",
    })
    .default("snat"),
  // Maglev hashing by default: behind ECMP every LB pod must pick the same backend for a flow.
  scheduler: z.enum(SCHEDULERS).default("mh"),
  // DSR on the nftables engine: tc BPF programs in the LB and backend pods carry the packets where
  // the kernel allows it (lb-image/fastpath), with the kernel path unchanged beneath them; "off"
  // keeps to the kernel path (and the LB pods get no CAP_BPF).
  fastPath: z.enum(FAST_PATH_MODES).default("auto"),
});

/** Whether the LB and backend pods run the DSR fast path (and the LB pods need CAP_BPF). */
export function usesFastPath(dataPlane: z.output<typeof dataPlaneSchema>): boolean {
  return dataPlane.mode === "dsr" && dataPlane.engine !== "ipvs" && dataPlane.fastPath === "auto";
}

// After a stop's withdrawal the pod keeps serving what the router still sends it, until no new
// connection has come for `quietS` (the router has moved on), at most `timeoutS`; its grace
// period is set from these (lb-image/src/controller/connectionDrain.ts).
export const drainSchema = z.strictObject({
  quietS: z.number().min(0.5).max(60).default(3),
  timeoutS: z.number().int().min(1).max(3600).default(30),
});

/** The drain checks that need the data plane too; `path` is where the drain settings are. */
export function checkDrain(
  engine: (typeof DATA_PLANES)[number],
  drain: z.output<typeof drainSchema>,
  ctx: z.RefinementCtx,
  path: PropertyKey[],
): void {
  if (drain.quietS >= drain.timeoutS)
    ctx.addIssue({
      code: "custom",
      path: [...path, "quietS"],
      message: `must be below drain.timeoutS (${drain.timeoutS}), or the quiet period could never end the drain; lower it or raise drain.timeoutS`,
    });
  // IPVS folds its connection counters every 2 s: a shorter quiet period would end the drain
  // while connections still arrive.
  if (engine !== "nftables" && drain.quietS < IPVS_COUNTER_LAG_S + 0.5)
    ctx.addIssue({
      code: "custom",
      path: [...path, "quietS"],
      message: `must be at least ${IPVS_COUNTER_LAG_S + 0.5} with dataPlane.engine ${engine} (IPVS updates its connection counters every ${IPVS_COUNTER_LAG_S} s); raise it, or use dataPlane.engine nftables`,
    });
}

/**
 * What DSR cannot serve, refused where it is configured rather than black-holed at run time: cloud
 * routes (the cloud drops replies that leave a backend's node with the VIP as source: AWS's
 * source/destination check, GCP's anti-spoofing). Both engines serve DSR: nftables encapsulates in
 * VXLAN, IPVS (tunnel mode) in IPIP; the node agent prepares backends for both.
 */
export function checkForwarding(
  dataPlane: { mode: (typeof FORWARDING_MODES)[number] },
  routingMode: (typeof ROUTING_MODES)[number] | undefined,
  ctx: z.RefinementCtx,
  path: PropertyKey[],
): void {
  if (dataPlane.mode !== "dsr") return;
  if (routingMode === "cloud-routes")
    ctx.addIssue({
      code: "custom",
      path,
      message:
        "dsr cannot be used with routingMode cloud-routes: the cloud drops replies that leave a backend's node with the VIP as their source; use snat",
    });
}

export const lbBgpSchema = z.strictObject({
  asn,
  /** Where the speakers peer: the route reflectors' addresses. */
  routeReflectors: z.array(ipv4Address).min(1, { error: "needs at least one route reflector address" }),
  bfd: bfdSchema.prefault({}),
  timers: bgpTimersSchema.prefault({}),
  gracefulRestartS: gracefulRestartS.default(120),
  /** File holding the TCP MD5 password (mounted from a Secret), when sessions are authenticated. */
  passwordFile: z.string().optional(),
});

/**
 * cloud-routes settings. `routeTablesLater`: an environment made the AWS route tables and hands
 * their ids over once they exist (PortableCluster writes them into the LB's config then).
 */
function cloudRoutesSchema(routeTablesLater: boolean) {
  return z
    .strictObject({
      cloud: z.enum(["aws", "gcp"]),
      /** AWS: the route tables to point VIPs at this LB in. */
      routeTableIds: z
        .array(
          z.string().regex(/^rtb-[0-9a-f]+$/, { error: "must be an AWS route table id like rtb-0123abcd" }),
        )
        .optional(),
      /** GCP: the VPC network the routes go into, and the project holding it (a Shared VPC's host). */
      network: z
        .string()
        .regex(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/, { error: "must be a GCP network name like default" })
        .optional(),
      project: z
        .string()
        .regex(/^[a-z][-a-z0-9]{4,28}[a-z0-9]$/, { error: "must be a GCP project id like my-project-123" })
        .optional(),
      // Ownership Leases (lb-image/src/cloudRoutes/routeLeases.ts): a crashed LB pod's VIPs move within
      // about leaseDurationS; holders renew every renewMs; the route tables are re-read every resyncS.
      leaseDurationS: z.number().int().min(2).max(60).default(3),
      renewMs: z.number().int().min(100).max(10_000).default(1_000),
      resyncS: z.number().int().min(10).max(3_600).default(60),
    })
    .superRefine((c, ctx) => {
      if (c.renewMs * 2 > c.leaseDurationS * 1000)
        ctx.addIssue({
          code: "custom",
          path: ["renewMs"],
          message:
            "must be at most half of leaseDurationS (in ms), or a holder could lose its Lease between two renewals",
        });
      // What each cloud's routes need to know before a pod starts: caught at preview, not in the pod.
      if (c.cloud === "aws" && !c.routeTableIds?.length && !routeTablesLater)
        ctx.addIssue({
          code: "custom",
          path: ["routeTableIds"],
          message:
            'is required with cloud aws: list the VPC route tables your clients\' subnets use, e.g. ["rtb-0123abcd"]',
        });
      for (const key of ["project", "network"] as const)
        if (c.cloud === "gcp" && !c[key])
          ctx.addIssue({
            code: "custom",
            path: [key],
            message:
              key === "project"
                ? 'is required with cloud gcp: set the id of the project holding the VPC network (a Shared VPC\'s host project), e.g. "my-project-123"'
                : 'is required with cloud gcp: set the VPC network the LB instances are in, e.g. "default"',
          });
    });
}

export const lbCloudRoutesSchema = cloudRoutesSchema(false);
/** The settings when an environment supplies the AWS route tables itself, once made. */
export const lbCloudRoutesSchemaRouteTablesLater = cloudRoutesSchema(true);

function configSchema(cloudRoutes: typeof lbCloudRoutesSchema) {
  return z
    .strictObject({
      loadBalancerClass: loadBalancerClassSchema.default(DEFAULT_LOAD_BALANCER_CLASS),
      // Also serve LoadBalancer Services without a class, as the cluster's default load balancer
      // (MetalLB's way). Off unless chosen: another load balancer may own those (a cloud's).
      serveClassless: z.boolean().default(false),
      routingMode: z.enum(ROUTING_MODES),
      podCidr: ipv4Cidr,
      vipPools: z
        .array(vipPoolSchema)
        .min(1, { error: "needs at least one pool, e.g. { name: 'default', cidr: '10.1.1.0/24' }" }),
      dataPlane: dataPlaneSchema.prefault({}),
      bgp: lbBgpSchema.optional(),
      drain: drainSchema.prefault({}),
      cloudRoutes: cloudRoutes.optional(),
      ports: z
        .strictObject({
          metrics: port.default(9150),
          health: port.default(9151),
          // The node agent runs in the node's network namespace: its port is taken on every LB node.
          nodeAgent: port.default(9152),
        })
        .prefault({}),
    })
    .superRefine((c, ctx) => {
      if (c.routingMode === "bgp" && !c.bgp)
        ctx.addIssue({
          code: "custom",
          path: ["bgp"],
          message: "is required when routingMode is bgp: set bgp.asn and bgp.routeReflectors",
        });
      if (c.routingMode === "cloud-routes" && !c.cloudRoutes)
        ctx.addIssue({
          code: "custom",
          path: ["cloudRoutes"],
          message: "is required when routingMode is cloud-routes: set cloudRoutes.cloud",
        });
      checkPoolsDistinct(c.vipPools, ctx, ["vipPools"]);
      c.vipPools.forEach((p, i) => {
        if (isIpv4Cidr(p.cidr) && isIpv4Cidr(c.podCidr) && cidrsOverlap(p.cidr, c.podCidr))
          ctx.addIssue({
            code: "custom",
            path: ["vipPools", i, "cidr"],
            message: `overlaps podCidr ${c.podCidr}; VIPs must lie outside the pod network`,
          });
      });
      checkDrain(c.dataPlane.engine, c.drain, ctx, ["drain"]);
      checkForwarding(c.dataPlane, c.routingMode, ctx, ["dataPlane", "mode"]);
      if (c.ports.metrics === c.ports.health)
        ctx.addIssue({
          code: "custom",
          path: ["ports", "health"],
          message: "must differ from ports.metrics",
        });
    });
}

export const lbConfigSchema = configSchema(lbCloudRoutesSchema);
/** The LB config before an environment's AWS route tables exist (LoadBalancer's routeTableIds). */
export const lbConfigSchemaRouteTablesLater = configSchema(lbCloudRoutesSchemaRouteTablesLater);

export type LbConfig = z.output<typeof lbConfigSchema>;
export type LbConfigInput = z.input<typeof lbConfigSchema>;
