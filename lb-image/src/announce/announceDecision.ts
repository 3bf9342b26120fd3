// What an LB pod announces, and on which sessions, as a pure function of what it knows about its
// whole path (ECMP paper's claim only holds if the router never points at a node that cannot
// deliver): a VIP is announced only while its rules are verified in the kernel (the candidates),
// the node routes its pool to this pod (checked through the data path), and the pod is Ready. The
// announcements go out only on sessions that BFD protects (the speaker always runs BFD), so the
// router never holds a path whose loss it would notice only after the hold time.
import { cidrContains, ipv4ToNumber } from "@portable-lb/core/config";

export interface SessionGate {
  established: boolean;
  /** BFD to that reflector is Up. */
  bfdUp: boolean;
}

export interface AnnounceInputs {
  /** VIPs whose rules are verified in the kernel and have a backend taking new flows. */
  candidates: string[];
  /** The VIP pools (CIDRs); the node routes each one to this pod separately. */
  pools: string[];
  /** Per pool: the last verdict of the node-route check; absent before the first one. */
  nodeRoute: ReadonlyMap<string, boolean>;
  /** This pod's Ready condition as the node agent relays it; undefined when it has not said. */
  ready: boolean | undefined;
  /** Per route reflector address. */
  sessions: ReadonlyMap<string, SessionGate>;
  reflectors: string[];
  draining: boolean;
}

/** Why something is held back: one per cause, for logs, metrics and Events. */
export interface Hold {
  reason: "Draining" | "NotReady" | "NodeRouteMissing" | "BfdNotUp";
  /** The pool or reflector it concerns, if any. */
  subject?: string;
}

export interface AnnounceDecision {
  vips: string[];
  /** Reflectors whose sessions carry the announcements. */
  exportTo: string[];
  holds: Hold[];
}

export function poolOf(vip: string, pools: string[]): string | undefined {
  return pools.find((p) => cidrContains(p, vip));
}

export function decideAnnouncements(i: AnnounceInputs): AnnounceDecision {
  const holds: Hold[] = [];
  const exportTo = i.reflectors.filter((r) => {
    const ok = i.sessions.get(r)?.bfdUp === true;
    // A session that is not even established has nothing to hold back yet.
    if (!ok && i.sessions.get(r)?.established) holds.push({ reason: "BfdNotUp", subject: r });
    return ok;
  });
  if (i.draining) return { vips: [], exportTo, holds: [{ reason: "Draining" }] };
  // Unknown (no node agent answered yet, or none runs): the node-route check still stands, and the
  // node agent routes a pool to a pod only once it is Ready, so a pod that was never Ready is held.
  if (i.ready === false) return { vips: [], exportTo, holds: [...holds, { reason: "NotReady" }] };
  const missing = new Set<string>();
  const vips = [...new Set(i.candidates)].sort().filter((vip) => {
    const pool = poolOf(vip, i.pools);
    const ok = pool !== undefined && i.nodeRoute.get(pool) === true;
    if (!ok && pool) missing.add(pool);
    return ok;
  });
  for (const pool of [...missing].sort()) holds.push({ reason: "NodeRouteMissing", subject: pool });
  return { vips, exportTo, holds };
}

/** Per pool with candidates, the VIP the node-route check is sent from (the lowest, for stability). */
export function probeSources(candidates: string[], pools: string[]): Map<string, string> {
  const sources = new Map<string, string>();
  for (const vip of [...candidates].sort((a, b) => ipv4ToNumber(a) - ipv4ToNumber(b))) {
    const pool = poolOf(vip, pools);
    if (pool && !sources.has(pool)) sources.set(pool, vip);
  }
  return sources;
}
