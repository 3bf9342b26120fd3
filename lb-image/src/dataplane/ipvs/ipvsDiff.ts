// The minimal set of ipvsadm commands that turns the current IPVS state into the desired one.
// Existing services and servers are edited in place (never deleted and re-added), so their
// connections survive: a scheduler or weight change drops nothing. The one exception is mh's
// server order (see inOrder): to add a server to an mh service in its canonical place, the servers
// that come after it are deleted and added again behind it, in the same batch. A deleted server
// with connections waits in IPVS's trash and the same server added back is taken from there, so
// its established connections keep their backend (the guest test checks this).
// So every LB's kernel list is the canonical order whatever its history, and for DSR (tunnel mode)
// every LB's Maglev table picks the same backend for a flow. A set change still remaps some new
// flows (mh's own disruption, ~1/N per server added or removed); established ones stay pinned by
// IPVS's connection table, the per-LB flow table, on the LB that holds them. A flow ECMP moves to
// another LB after such a change is re-hashed there and may land on another backend (reset).
import { backendKey, compareKeys, serviceKey } from "../model.ts";
import { serverSpec, serviceAddress, serviceSpec } from "./ipvsadmSave.ts";
import type { IpvsServer, IpvsService } from "./ipvsState.ts";

export function ipvsDiff(current: IpvsService[], desired: IpvsService[]): string[] {
  const cur = new Map(current.map((s) => [serviceKey(s), s]));
  const want = new Map(desired.map((s) => [serviceKey(s), s]));
  const commands: string[] = [];
  for (const [key, s] of cur) if (!want.has(key)) commands.push(`-D ${serviceAddress(s)}`);
  for (const [key, w] of want) {
    const c = cur.get(key);
    if (!c) {
      commands.push(
        `-A ${serviceSpec(w)}`,
        ...inCanonicalOrder(w.servers).map((r) => `-a ${serverSpec(w, r)}`),
      );
      continue;
    }
    const rescheduled = c.scheduler !== w.scheduler || c.flags.join(",") !== w.flags.join(",");
    if (rescheduled) commands.push(`-E ${serviceSpec(w)}`);
    const curServers = new Map(c.servers.map((r) => [backendKey(r), r]));
    const wantServers = new Map(w.servers.map((r) => [backendKey(r), r]));
    for (const [rk, r] of curServers)
      if (!wantServers.has(rk)) commands.push(`-d ${serviceAddress(c)} -r ${r.ip}:${r.port}`);
    const readd = new Set(w.scheduler === "mh" ? reAdded(c, w, rescheduled) : []);
    for (const rk of readd) if (curServers.has(rk)) commands.push(`-d ${serviceAddress(c)} -r ${rk}`);
    for (const r of inCanonicalOrder(w.servers)) {
      const rk = backendKey(r);
      const old = curServers.get(rk);
      if (!old || readd.has(rk)) commands.push(`-a ${serverSpec(w, r)}`);
      else if (old.weight !== r.weight || old.method !== r.method) commands.push(`-e ${serverSpec(w, r)}`);
    }
  }
  return commands;
}

/**
 * The desired servers of an mh service to (re)add, from the first one the kernel lacks onwards in
 * canonical order; all of them when the kernel's order is not canonical (or was not mh's concern).
 * Deleting servers keeps the rest in order, so removals alone need none.
 */
function reAdded(c: IpvsService, w: IpvsService, rescheduled: boolean): string[] {
  const wanted = inCanonicalOrder(w.servers).map(backendKey);
  if (!c.inOrder || (rescheduled && c.scheduler !== "mh")) return wanted;
  const have = new Set(c.servers.map(backendKey));
  const first = wanted.findIndex((k) => !have.has(k));
  return first < 0 ? [] : wanted.slice(first);
}

function inCanonicalOrder(servers: IpvsServer[]): IpvsServer[] {
  return [...servers].sort((a, b) => compareKeys(backendKey(a), backendKey(b)));
}
