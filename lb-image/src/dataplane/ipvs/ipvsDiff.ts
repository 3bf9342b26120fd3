// The minimal set of ipvsadm commands that turns the current IPVS state into the desired one.
// Existing services and servers are edited in place (never deleted and re-added), so their
// connections survive: a scheduler or weight change drops nothing.
import { backendKey, serviceKey } from "../model.ts";
import { serverSpec, serviceAddress, serviceSpec } from "./ipvsadmSave.ts";
import type { IpvsService } from "./ipvsState.ts";

export function ipvsDiff(current: IpvsService[], desired: IpvsService[]): string[] {
  const cur = new Map(current.map((s) => [serviceKey(s), s]));
  const want = new Map(desired.map((s) => [serviceKey(s), s]));
  const commands: string[] = [];
  for (const [key, s] of cur) if (!want.has(key)) commands.push(`-D ${serviceAddress(s)}`);
  for (const [key, w] of want) {
    const c = cur.get(key);
    if (!c) {
      commands.push(`-A ${serviceSpec(w)}`, ...w.servers.map((r) => `-a ${serverSpec(w, r)}`));
      continue;
    }
    if (c.scheduler !== w.scheduler || c.flags.join(",") !== w.flags.join(","))
      commands.push(`-E ${serviceSpec(w)}`);
    const curServers = new Map(c.servers.map((r) => [backendKey(r), r]));
    const wantServers = new Map(w.servers.map((r) => [backendKey(r), r]));
    for (const [rk, r] of curServers)
      if (!wantServers.has(rk)) commands.push(`-d ${serviceAddress(c)} -r ${r.ip}:${r.port}`);
    for (const [rk, r] of wantServers) {
      const old = curServers.get(rk);
      if (!old) commands.push(`-a ${serverSpec(w, r)}`);
      else if (old.weight !== r.weight || old.method !== r.method) commands.push(`-e ${serverSpec(w, r)}`);
    }
  }
  return commands;
}
