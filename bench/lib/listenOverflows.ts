// Connections the demo pods' servers never accepted: a connection that finds the accept queue full
// is dropped and retried by TCP a second later, which costs the client a second and has nothing to
// do with the path to the pod (busybox's httpd, the demo's server before, queued only 9). The
// throughput bench counts the drops, per run, to show whether any happened.
import { readFileSync, readlinkSync } from "node:fs";
import type { ProcessSample } from "./idleCpu.ts";

/** TcpExt's ListenOverflows from the text of a /proc/<pid>/net/netstat. */
export function listenOverflows(netstat: string): number {
  const lines = netstat.split("\n").filter((l) => l.startsWith("TcpExt:"));
  const [names, values] = lines.map((l) => l.trim().split(/\s+/));
  const i = names?.indexOf("ListenOverflows") ?? -1;
  const value = i > 0 ? Number(values?.[i]) : NaN;
  if (!Number.isInteger(value)) throw new Error("/proc/net/netstat: no TcpExt ListenOverflows");
  return value;
}

/** The sum of ListenOverflows over the network namespaces of the processes named `program`. */
export function overflowsOf(samples: ProcessSample[], program: string): number {
  const byNetns = new Map<string, number>();
  for (const s of samples) {
    if (s.stat.comm !== program) continue;
    try {
      const netns = readlinkSync(`/proc/${s.stat.pid}/ns/net`);
      if (!byNetns.has(netns))
        byNetns.set(netns, listenOverflows(readFileSync(`/proc/${s.stat.pid}/net/netstat`, "utf8")));
    } catch {
      // gone meanwhile
    }
  }
  return [...byNetns.values()].reduce((a, b) => a + b, 0);
}
