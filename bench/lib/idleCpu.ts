// What the lab's processes cost at rest, from two snapshots of /proc: per group of processes (by
// command line: every node's kubelet is one group), the CPU time they took between the snapshots,
// their own (utime + stime) and their waited-for children's (cutime + cstime: the short-lived `ip`
// and `nft` runs of a controller count there), as % of one core.
import { CLOCK_TICKS_PER_SECOND, type ProcStat } from "@portable-lb/lab";

/** One process as a snapshot saw it. */
export interface ProcessSample {
  stat: ProcStat;
  /** Its command line's arguments (empty for kernel threads and zombies). */
  argv: string[];
}

export interface GroupCpu {
  group: string;
  /** Processes of the group seen at the end (alive through the window or started in it). */
  processes: number;
  /** % of one core: the processes' own time, and their children's. */
  selfPct: number;
  childrenPct: number;
}

// Interpreters and shells: the script they run names the process.
const INTERPRETER = /^(node(js)?\d*|python3?(\.\d+)?|sh|bash|dash)$/;

const basename = (path: string) => path.slice(path.lastIndexOf("/") + 1);

/**
 * The group of a command line: the program's name, or for an interpreter the script's (`node
 * /usr/local/bin/portable-lb-controller --config …` is `portable-lb-controller`); the kernel's
 * command name in brackets when there is no command line.
 */
export function processGroup(argv: string[], comm: string): string {
  const [program, ...args] = argv;
  if (program === undefined || program === "") return `[${comm}]`;
  const name = basename(program);
  if (!INTERPRETER.test(name)) return name;
  if (args[0] === "-c") return `${name} -c`;
  const script = args.find((a) => !a.startsWith("-"));
  return script === undefined ? name : basename(script);
}

/** A process's identity across snapshots: the pid alone may be reused. */
const identity = (s: ProcessSample) => `${s.stat.pid}@${s.stat.startTime}`;

/**
 * CPU per group between two snapshots `seconds` apart, most first. A process seen only at the end
 * started in the window: all its time counts. One gone by the end counts only through the parent
 * that waited for it (its children's time), when that parent is one of the lab's.
 */
export function cpuByGroup(before: ProcessSample[], after: ProcessSample[], seconds: number): GroupCpu[] {
  if (!(seconds > 0)) throw new Error(`the window must be longer than 0 s (got ${seconds})`);
  const earlier = new Map(before.map((s) => [identity(s), s.stat]));
  const groups = new Map<string, { processes: number; self: number; children: number }>();
  for (const s of after) {
    const group = processGroup(s.argv, s.stat.comm);
    const was = earlier.get(identity(s));
    const g = groups.get(group) ?? { processes: 0, self: 0, children: 0 };
    g.processes++;
    g.self += s.stat.utime + s.stat.stime - (was ? was.utime + was.stime : 0);
    g.children += s.stat.cutime + s.stat.cstime - (was ? was.cutime + was.cstime : 0);
    groups.set(group, g);
  }
  const pct = (ticks: number) => (100 * ticks) / CLOCK_TICKS_PER_SECOND / seconds;
  return [...groups]
    .map(([group, g]) => ({
      group,
      processes: g.processes,
      selfPct: pct(g.self),
      childrenPct: pct(g.children),
    }))
    .sort(
      (a, b) => b.selfPct + b.childrenPct - (a.selfPct + a.childrenPct) || a.group.localeCompare(b.group),
    );
}

/** The table the benchmark prints: one line per group, and the total. */
export function formatGroups(groups: GroupCpu[], seconds: number): string {
  const rows = groups.map((g) => [
    g.group,
    String(g.processes),
    g.selfPct.toFixed(2),
    g.childrenPct.toFixed(2),
    (g.selfPct + g.childrenPct).toFixed(2),
  ]);
  const sum = (f: (g: GroupCpu) => number) => groups.reduce((n, g) => n + f(g), 0);
  rows.push([
    "total",
    String(sum((g) => g.processes)),
    sum((g) => g.selfPct).toFixed(2),
    sum((g) => g.childrenPct).toFixed(2),
    sum((g) => g.selfPct + g.childrenPct).toFixed(2),
  ]);
  const header = ["group", "processes", "own %", "children %", "total %"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const format = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [
    `the lab's processes over ${seconds} s, in % of one core (children: the ones they ran and waited for)`,
    format(header),
    ...rows.map(format),
  ].join("\n");
}
