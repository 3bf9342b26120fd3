// What to change in a GCP network's routes. GCP spreads traffic over routes of equal priority to
// several next hops (ECMP), so every live LB pod keeps its own VIP/32 route to its instance, named
// from VIP and instance and marked as ours in its description. Routes not so marked are never
// touched. A pod removes its own routes for VIPs it no longer serves; routes of instances that no
// longer run a live LB pod are removed by the one pod fenced to clean up after that instance.
import { createHash } from "node:crypto";

const MARK = "portable-lb cloud-routes";

export interface OwnedRoute {
  name: string;
  vip: string;
  /** The next hop instance's URL (projects/P/zones/Z/instances/N). */
  instance: string;
}

const short = (s: string, n: number) => createHash("sha256").update(s).digest("hex").slice(0, n);

/** A route name (RFC 1035, at most 63 characters) unique per group, VIP and instance. */
export function gcpRouteName(group: string, vip: string, instance: string): string {
  return `plb-${group.slice(0, 12)}-${vip.replaceAll(".", "-")}-${short(instance, 12)}`;
}

export function gcpRouteDescription(group: string, vip: string, instance: string): string {
  return `${MARK} group=${group} vip=${vip} instance=${instance}`;
}

/** The route as ours (this group's), or undefined for anyone else's. */
export function ownedRoute(
  group: string,
  r: { name?: string | null; description?: string | null },
): OwnedRoute | undefined {
  const m = /^portable-lb cloud-routes group=(\S+) vip=(\S+) instance=(\S+)$/.exec(r.description ?? "");
  if (!m || m[1] !== group || !r.name) return undefined;
  return { name: r.name, vip: m[2]!, instance: m[3]! };
}

export interface GcpRoutePlan {
  insert: string[];
  delete: OwnedRoute[];
}

export function planGcpRoutes(o: {
  routes: readonly OwnedRoute[];
  served: ReadonlySet<string>;
  self: string;
  /** Instances of this group's LB pods no longer live whose routes this pod is fenced to remove. */
  cleanUp: ReadonlySet<string>;
}): GcpRoutePlan {
  const mine = new Set(o.routes.filter((r) => r.instance === o.self).map((r) => r.vip));
  return {
    insert: [...o.served].filter((vip) => !mine.has(vip)).sort(),
    delete: o.routes.filter(
      (r) =>
        (r.instance === o.self && !o.served.has(r.vip)) ||
        (r.instance !== o.self && o.cleanUp.has(r.instance)),
    ),
  };
}
