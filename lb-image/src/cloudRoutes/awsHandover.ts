// What a gracefully stopping AWS LB pod writes before it lets its VIP Leases go: each VIP it holds
// pointed at its successor, the owner every pod computes once this pod has left (ownerOf over the
// live members but this one), so the successor, taking the freed Lease, finds nothing to write and
// no packet waits for its round trips. The writes follow the usual rules (planAwsRoutes): only
// routes to our LB pods are replaced, foreign ones are left alone.
import { planAwsRoutes, type AwsRoutePlan, type TableRoute } from "./awsRoutePlan.ts";
import { ownerOf } from "./ownerAssignment.ts";

export interface AwsHandover {
  /** Per successor: its target and the writes that point its VIPs at it. */
  moves: { successor: string; target: string; vips: string[]; plan: AwsRoutePlan }[];
  /** VIPs no live pod is left to take: their routes stay as they are. */
  orphaned: string[];
  /** VIPs whose successor's target is not known: left for the successor to write. */
  unknownTarget: { vip: string; successor: string }[];
}

export function planAwsHandover(o: {
  /** The VIPs this pod holds the Lease of and serves. */
  vips: readonly string[];
  /** This pod's identity. */
  self: string;
  /** The live members as every pod sees them (this one included or not), with their targets. */
  members: readonly { identity: string; target: string }[];
  tables: readonly string[];
  routes: readonly TableRoute[];
  /** Every LB pod's target, ours included. */
  ours: ReadonlySet<string>;
  local?: readonly { table: string; cidr: string }[];
}): AwsHandover {
  const others = o.members.filter((m) => m.identity !== o.self);
  const successors = others.map((m) => m.identity);
  const targetOf = new Map(others.map((m) => [m.identity, m.target]));
  const handover: AwsHandover = { moves: [], orphaned: [], unknownTarget: [] };
  const bySuccessor = new Map<string, string[]>();
  for (const vip of o.vips) {
    const successor = ownerOf(vip, successors);
    if (successor === undefined) handover.orphaned.push(vip);
    else if (!targetOf.get(successor)) handover.unknownTarget.push({ vip, successor });
    else bySuccessor.set(successor, [...(bySuccessor.get(successor) ?? []), vip]);
  }
  for (const [successor, vips] of bySuccessor) {
    const target = targetOf.get(successor)!;
    const plan = planAwsRoutes({
      tables: o.tables,
      routes: o.routes,
      point: new Set(vips),
      remove: new Set(),
      self: target,
      ours: new Set([...o.ours, target]),
      ...(o.local && { local: o.local }),
    });
    handover.moves.push({ successor, target, vips, plan });
  }
  return handover;
}
