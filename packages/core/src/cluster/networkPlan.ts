// The cluster's address plan: node, pod and service networks and the VIP pools, none overlapping.
import { z } from "zod";
import { cidrsOverlap, ipv4Cidr, isIpv4Cidr } from "../config/cidr.ts";
import { checkPoolsDistinct, vipPoolSchema } from "../config/vipPool.ts";

export const networkPlanSchema = z
  .strictObject({
    /** Where the nodes (and the upstream router) live. */
    nodeCidr: ipv4Cidr,
    podCidr: ipv4Cidr,
    serviceCidr: ipv4Cidr,
    vipPools: z
      .array(vipPoolSchema)
      .min(1, { error: "needs at least one pool, e.g. { name: 'default', cidr: '10.1.1.0/24' }" }),
  })
  .superRefine((plan, ctx) => {
    // Every pair of distinct networks must be disjoint; a VIP inside another network would be unroutable.
    const named: [string, PropertyKey[], string][] = [
      ["network.nodeCidr", ["nodeCidr"], plan.nodeCidr],
      ["network.podCidr", ["podCidr"], plan.podCidr],
      ["network.serviceCidr", ["serviceCidr"], plan.serviceCidr],
      ...plan.vipPools.map((p, i): [string, PropertyKey[], string] => [
        `network.vipPools[${i}].cidr`,
        ["vipPools", i, "cidr"],
        p.cidr,
      ]),
    ];
    named.forEach(([, path, cidr], i) => {
      if (!isIpv4Cidr(cidr)) return;
      const earlier = named
        .slice(0, i)
        .find(([, p, other]) => p[0] !== "vipPools" && isIpv4Cidr(other) && cidrsOverlap(other, cidr));
      if (earlier)
        ctx.addIssue({
          code: "custom",
          path,
          message: `overlaps ${earlier[0]} (${earlier[2]}); give each network its own addresses`,
        });
    });
    checkPoolsDistinct(plan.vipPools, ctx, ["vipPools"]);
  });

export type NetworkPlan = z.output<typeof networkPlanSchema>;
export type NetworkPlanInput = z.input<typeof networkPlanSchema>;
