// A process sample for the CPU accounting tests, made up as /proc would show it.
import { parseProcStat } from "@portable-lb/lab";
import type { ProcessSample } from "../idleCpu.ts";

/** A process as /proc shows it: CPU times in ticks (utime, stime, cutime, cstime). */
export function sample(
  pid: number,
  argv: string[],
  [utime, stime, cutime, cstime]: number[],
  start = 1000,
): ProcessSample {
  const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
  fields[0] = "S";
  fields[14 - 3] = String(utime);
  fields[15 - 3] = String(stime);
  fields[16 - 3] = String(cutime);
  fields[17 - 3] = String(cstime);
  fields[22 - 3] = String(start);
  return { stat: parseProcStat(`${pid} (${argv[0] ?? "kthread"}) ${fields.join(" ")}`), argv };
}
