// The whole machine's busy CPU time, from /proc/stat: what a run cost every process on it (the
// client, the LBs, the pods, the kernel's softirq work), as the kernel accounts it. Busy is every
// state but idle and iowait; guest time is already inside user and nice.
import { readFileSync } from "node:fs";
import { CLOCK_TICKS_PER_SECOND } from "@portable-lb/lab";

/** Busy CPU seconds since boot, summed over all CPUs, from the text of /proc/stat. */
export function busySeconds(procStat: string): number {
  const line = procStat.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new Error("/proc/stat: no aggregate `cpu` line");
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = [user, nice, system, irq, softirq, steal].reduce((a: number, v) => a + (v ?? 0), 0);
  if (!Number.isFinite(busy)) throw new Error(`/proc/stat: cannot read the cpu line: ${line}`);
  return busy / CLOCK_TICKS_PER_SECOND;
}

/** Measures the busy CPU seconds `run` costs the machine. */
export async function busyDuring<T>(run: () => Promise<T>): Promise<{ result: T; busyS: number }> {
  const before = busySeconds(readFileSync("/proc/stat", "utf8"));
  const result = await run();
  return { result, busyS: busySeconds(readFileSync("/proc/stat", "utf8")) - before };
}
