// The whole machine's busy CPU time, from /proc/stat: what a run cost every process on it (the
// client, the LBs, the pods, the kernel's softirq work), as the kernel accounts it. Busy is every
// state but idle, iowait and steal; guest time is already inside user and nice. Steal (time the
// hypervisor ran another guest while ours wanted to run) is the host's noise, not work done here:
// it is kept apart, so a report can show which runs the host disturbed.
import { readFileSync } from "node:fs";
import { CLOCK_TICKS_PER_SECOND } from "@portable-lb/lab";

export interface CpuSeconds {
  busy: number;
  steal: number;
}

/** Busy and stolen CPU seconds since boot, summed over all CPUs, from the text of /proc/stat. */
export function cpuSeconds(procStat: string): CpuSeconds {
  const line = procStat.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new Error("/proc/stat: no aggregate `cpu` line");
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = [user, nice, system, irq, softirq].reduce((a: number, v) => a + (v ?? 0), 0);
  if (!Number.isFinite(busy)) throw new Error(`/proc/stat: cannot read the cpu line: ${line}`);
  return { busy: busy / CLOCK_TICKS_PER_SECOND, steal: (steal ?? 0) / CLOCK_TICKS_PER_SECOND };
}

/** Measures the busy (and stolen) CPU seconds `run` costs the machine. */
export async function busyDuring<T>(
  run: () => Promise<T>,
): Promise<{ result: T; busyS: number; stealS: number }> {
  const before = cpuSeconds(readFileSync("/proc/stat", "utf8"));
  const result = await run();
  const after = cpuSeconds(readFileSync("/proc/stat", "utf8"));
  return { result, busyS: after.busy - before.busy, stealS: after.steal - before.steal };
}
