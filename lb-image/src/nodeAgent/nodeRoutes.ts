// Applies the node agent's routes to the node's main routing table, by diff. Our routes carry their
// own routing protocol number, so the agent reads back exactly what it owns (and adopts it after a
// restart), and never touches a route someone else made.
import { z } from "zod";
import { run } from "../dataplane/exec.ts";
import type { NodeRoute } from "./desiredRoutes.ts";

/** Our `proto` in `ip route` (unassigned in iproute2's rt_protos). */
export const NODE_ROUTE_PROTO = 211;

const routeSchema = z.object({
  dst: z.string(),
  gateway: z.string().optional(),
  nexthops: z.array(z.object({ gateway: z.string().optional() })).optional(),
});

/** `ip -j route show proto N` → routes; a host prefix comes back without "/32". */
export function parseRoutes(json: string): NodeRoute[] {
  return z
    .array(routeSchema)
    .parse(JSON.parse(json || "[]"))
    .map((r) => ({
      prefix: r.dst.includes("/") ? r.dst : `${r.dst}/32`,
      via: (r.nexthops ? r.nexthops.map((n) => n.gateway) : [r.gateway])
        .filter((g): g is string => g !== undefined)
        .sort(),
    }));
}

export function routeCommand(route: NodeRoute): string[] {
  const hops =
    route.via.length === 1 ? ["via", route.via[0]!] : route.via.flatMap((g) => ["nexthop", "via", g]);
  return ["route", "replace", route.prefix, "proto", String(NODE_ROUTE_PROTO), ...hops];
}

export interface RouteDiff {
  replace: NodeRoute[];
  remove: string[];
}

export function diffRoutes(current: NodeRoute[], desired: NodeRoute[]): RouteDiff {
  const have = new Map(current.map((r) => [r.prefix, r.via.join(",")]));
  const want = new Set(desired.map((r) => r.prefix));
  return {
    replace: desired.filter((r) => have.get(r.prefix) !== r.via.join(",")),
    remove: current.filter((r) => !want.has(r.prefix)).map((r) => r.prefix),
  };
}

export class NodeRoutes {
  private readonly ip: [string, ...string[]];

  constructor(ip: [string, ...string[]] = ["ip"]) {
    this.ip = ip;
  }

  async current(): Promise<NodeRoute[]> {
    return parseRoutes(await run([...this.ip, "-j", "route", "show", "proto", String(NODE_ROUTE_PROTO)]));
  }

  /** Makes our routes exactly `desired` (from `current`, read now if not given); returns how many changed. */
  async apply(desired: NodeRoute[], current?: NodeRoute[]): Promise<number> {
    const { replace, remove } = diffRoutes(current ?? (await this.current()), desired);
    for (const r of replace) await run([...this.ip, ...routeCommand(r)]);
    for (const prefix of remove)
      await run([...this.ip, "route", "del", prefix, "proto", String(NODE_ROUTE_PROTO)]);
    return replace.length + remove.length;
  }
}
