// What to change in AWS route tables, computed from what they hold. A route table holds one target
// per destination, so the VIP's fenced owner points VIP/32 at its own ENI. Only routes whose target
// is one of our LB pods' ENIs are replaced or deleted; a route for the same destination pointing
// anywhere else belongs to someone else: it is left alone and reported. A VIP inside a table's
// `local` range (the VPC's own addresses) cannot be routed there: it is reported, not written.
import { cidrContains } from "@portable-lb/core/config";

/** A /32 route as read from a route table; `target` is its ENI, else whatever else it points at. */
export interface TableRoute {
  table: string;
  vip: string;
  target: string;
}

export interface AwsRoutePlan {
  create: { table: string; vip: string }[];
  replace: { table: string; vip: string; from: string }[];
  remove: { table: string; vip: string }[];
  /** Routes for our VIPs that point somewhere not ours: never touched. */
  foreign: TableRoute[];
  /** VIPs inside a table's local range: AWS delivers them in the VPC, whatever route we add. */
  inside: { table: string; vip: string; cidr: string }[];
}

export function planAwsRoutes(o: {
  tables: readonly string[];
  routes: readonly TableRoute[];
  /** The VIPs this pod holds and serves: each to point at `self`. */
  point: ReadonlySet<string>;
  /** VIPs no Service has any more whose Lease this pod holds: their routes to us go. */
  remove: ReadonlySet<string>;
  self: string;
  /** Every LB pod's target, ours included. */
  ours: ReadonlySet<string>;
  local?: readonly { table: string; cidr: string }[];
}): AwsRoutePlan {
  const plan: AwsRoutePlan = { create: [], replace: [], remove: [], foreign: [], inside: [] };
  const current = new Map(o.routes.map((r) => [`${r.table} ${r.vip}`, r]));
  for (const table of o.tables) {
    for (const vip of o.point) {
      const local = o.local?.find((l) => l.table === table && cidrContains(l.cidr, vip));
      if (local) {
        plan.inside.push({ table, vip, cidr: local.cidr });
        continue;
      }
      const r = current.get(`${table} ${vip}`);
      if (!r) plan.create.push({ table, vip });
      else if (r.target === o.self) continue;
      else if (o.ours.has(r.target)) plan.replace.push({ table, vip, from: r.target });
      else plan.foreign.push(r);
    }
    for (const vip of o.remove) {
      const r = current.get(`${table} ${vip}`);
      if (!r) continue;
      if (o.ours.has(r.target)) plan.remove.push({ table, vip });
      else plan.foreign.push(r);
    }
  }
  return plan;
}

export const planIsEmpty = (p: AwsRoutePlan) => !p.create.length && !p.replace.length && !p.remove.length;
