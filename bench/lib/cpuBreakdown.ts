// Where one load run's busy CPU went, in ms per request: per group of the lab's processes (from two
// /proc snapshots, idleCpu.ts), the load client (a waited-for child of the bench, outside the lab's
// namespaces), and the rest: the machine's busy time no such process took (kernel threads, softirq
// the kernel ran outside them). Softirq work the kernel runs in a process's context (a packet sent
// through veth is often forwarded on through every namespace at once) counts to that process, so the
// load client's share grows with the hops its requests cross.
import { cpuByGroup, type ProcessSample } from "./idleCpu.ts";

export const LOAD_CLIENT = "(load client)";
export const REST = "(rest: kernel threads, softirq outside these)";

export interface RunCpu {
  /** The lab's processes at the start and the end of the run. */
  before: ProcessSample[];
  after: ProcessSample[];
  /** The run's length, its requests, the whole machine's busy CPU and the load client's, in seconds. */
  elapsedS: number;
  requests: number;
  busyS: number;
  clientS: number;
}

export function cpuBreakdown(run: RunCpu): Record<string, number> {
  const perRequestMs = (cpuS: number) => (1000 * cpuS) / Math.max(1, run.requests);
  const where: Record<string, number> = {};
  for (const g of cpuByGroup(run.before, run.after, run.elapsedS))
    where[g.group] = perRequestMs(((g.selfPct + g.childrenPct) / 100) * run.elapsedS);
  where[LOAD_CLIENT] = perRequestMs(run.clientS);
  const accounted = Object.values(where).reduce((a, b) => a + b, 0);
  where[REST] = perRequestMs(run.busyS) - accounted;
  return where;
}
