// VIP pools: the addresses the LB controller hands to LoadBalancer Services.
import { z } from "zod";
import { cidrsOverlap, ipv4Cidr, isIpv4Cidr } from "./cidr.ts";

export const vipPoolSchema = z.strictObject({
  name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, {
    error: "must be a DNS label (lowercase letters, digits, '-')",
  }),
  cidr: ipv4Cidr,
  /** Skip the .0 and .255 addresses of each /24, which some old clients treat as broadcast (as MetalLB does). */
  avoidBuggyIps: z.boolean().default(false),
  /**
   * false: the pool's addresses go only to Services that name it (portable-lb.io/vip-pool) or request
   * one of them, never to a Service that asked for nothing (MetalLB's autoAssign). For a pool that
   * holds another platform's VIPs during a migration by BGP, or addresses kept for chosen Services.
   * Absent: true.
   */
  autoAssign: z.boolean().optional(),
});

/** Whether a Service that names no pool and requests no address may get one of `pool`'s. */
export function autoAssigns(pool: Pick<VipPool, "autoAssign">): boolean {
  return pool.autoAssign !== false;
}

export type VipPool = z.output<typeof vipPoolSchema>;

/** Adds an issue for every pool that repeats a name or overlaps an earlier pool. */
export function checkPoolsDistinct(pools: VipPool[], ctx: z.RefinementCtx, path: PropertyKey[]): void {
  pools.forEach((pool, i) => {
    const clash = pools.slice(0, i).findIndex((p) => p.name === pool.name);
    if (clash >= 0)
      ctx.addIssue({
        code: "custom",
        path: [...path, i, "name"],
        message: `duplicates the name of vipPools[${clash}]; give each pool its own name`,
      });
    const overlap = isIpv4Cidr(pool.cidr)
      ? pools.slice(0, i).findIndex((p) => isIpv4Cidr(p.cidr) && cidrsOverlap(p.cidr, pool.cidr))
      : -1;
    if (overlap >= 0)
      ctx.addIssue({
        code: "custom",
        path: [...path, i, "cidr"],
        message: `overlaps vipPools[${overlap}] (${pools[overlap]!.cidr}); pools must not share addresses`,
      });
  });
}
