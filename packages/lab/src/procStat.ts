// One line of /proc/<pid>/stat, parsed: who a process is (pid and start time), its state and parent,
// and the CPU time it and its reaped children took. The command name (field 2) may hold spaces and
// parentheses: the fields after it start at the last ") ".

export interface ProcStat {
  pid: number;
  /** The command name as the kernel keeps it (15 characters at most), without its parentheses. */
  comm: string;
  state: string;
  ppid: number;
  /** CPU time in clock ticks (USER_HZ): its own in user and kernel mode, and its waited-for children's. */
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
  /** Clock ticks since boot at its start: with the pid, a process's identity. */
  startTime: string;
}

/** USER_HZ: the unit of /proc's CPU times on every Linux architecture that matters here. */
export const CLOCK_TICKS_PER_SECOND = 100;

export function parseProcStat(stat: string): ProcStat {
  const open = stat.indexOf(" (");
  const close = stat.lastIndexOf(") ");
  // Field n (from 3, the state) is at index n - 3.
  const fields =
    close < 0
      ? []
      : stat
          .slice(close + 2)
          .trim()
          .split(" ");
  const number = (field: number) => Number(fields[field - 3]);
  const parsed = {
    pid: Number(stat.slice(0, open)),
    comm: stat.slice(open + 2, close),
    state: fields[0] ?? "",
    ppid: number(4),
    utime: number(14),
    stime: number(15),
    cutime: number(16),
    cstime: number(17),
    startTime: fields[22 - 3] ?? "",
  };
  const numbers = [parsed.pid, parsed.ppid, parsed.utime, parsed.stime, parsed.cutime, parsed.cstime];
  if (open < 0 || close < open || !numbers.every(Number.isInteger) || !/^\d+$/.test(parsed.startTime))
    throw new Error(`not a /proc/<pid>/stat line: ${stat.slice(0, 120)}`);
  return parsed;
}
