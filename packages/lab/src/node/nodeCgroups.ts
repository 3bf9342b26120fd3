// A lab node's cgroup root, made in every cgroup hierarchy of this machine (v1 controllers and the
// hybrid's v2 mount) before its kubelet starts (the kubelet refuses a cgroupRoot that does not
// exist), and removed with everything in it: whatever runs under it is the node's pods by
// construction.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitUntil } from "../processes.ts";

/** Mount points of the cgroup hierarchies in a mountinfo text. */
export function cgroupMounts(mountinfo: string): string[] {
  return mountinfo
    .split("\n")
    .map((line) => line.split(" "))
    .filter((f) => {
      const type = f[f.indexOf("-") + 1];
      return type === "cgroup" || type === "cgroup2";
    })
    .map((f) => f[4]!);
}

function hierarchies(): string[] {
  return cgroupMounts(readFileSync("/proc/self/mountinfo", "utf8"));
}

export function createCgroupRoot(root: string): void {
  for (const mount of hierarchies()) {
    const dir = join(mount, root);
    mkdirSync(dir, { recursive: true });
    // A new v1 cpuset has no CPUs or memory nodes until given its parent's.
    if (existsSync(join(dir, "cpuset.cpus"))) {
      for (const file of ["cpuset.cpus", "cpuset.mems"])
        writeFileSync(join(dir, file), readFileSync(join(mount, file), "utf8"));
    }
  }
}

/** Every cgroup folder under `root` in every hierarchy, deepest first. */
function subtree(root: string): string[] {
  const walk = (dir: string): string[] => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      // The kubelet or runc removed a pod's or container's cgroup while we walked.
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw e;
    }
    return entries
      .filter((e) => e.isDirectory())
      .flatMap((e) => walk(join(dir, e.name)))
      .concat(dir);
  };
  return hierarchies()
    .map((m) => join(m, root))
    .filter((d) => existsSync(d))
    .flatMap(walk);
}

/** The pids in the node's cgroups (any hierarchy). */
export function cgroupPids(root: string): number[] {
  const pids = new Set<number>();
  for (const dir of subtree(root)) {
    try {
      for (const p of readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean))
        pids.add(Number(p));
    } catch {
      // removed meanwhile
    }
  }
  return [...pids];
}

/** The cgroup root of node `name` of `scope` (one lab). */
export function nodeCgroupRoot(scope: string, name: string): string {
  return `/${CGROUP_PREFIX}${scope}-${name}`;
}

const CGROUP_PREFIX = "portable-lb-";

/**
 * Removes the cgroup roots (and the pods still running in them) of labs that are gone: a run
 * killed before its nodes stopped leaves its containers running, each in its own pod network
 * namespace, where the netns lab's reaper cannot see them. Returns one line per root removed.
 */
export async function reapStaleNodeCgroups(live: (scope: string) => boolean): Promise<string[]> {
  const roots = new Set<string>();
  for (const mount of hierarchies())
    for (const entry of readdirSync(mount, { withFileTypes: true }))
      if (entry.isDirectory() && entry.name.startsWith(CGROUP_PREFIX)) roots.add(entry.name);
  const lines: string[] = [];
  for (const root of roots) {
    const scope = root.slice(CGROUP_PREFIX.length).split("-")[0]!;
    if (live(scope)) continue;
    const pids = cgroupPids(`/${root}`);
    await removeCgroupRoot(`/${root}`);
    lines.push(
      `lab node cgroups: removed stale /${root}` + (pids.length ? `; killed pids ${pids.join(", ")}` : ""),
    );
  }
  return lines;
}

/** Kills what still runs under `root` and removes its cgroups; throws naming what stays. */
export async function removeCgroupRoot(root: string, timeoutMs = 15_000): Promise<void> {
  const emptied = await waitUntil(
    () => {
      const pids = cgroupPids(root);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone already
        }
      }
      return pids.length === 0;
    },
    timeoutMs,
    100,
  );
  if (!emptied) throw new Error(`cgroup ${root}: pids ${cgroupPids(root).join(", ")} did not exit`);
  // A cgroup whose last task just exited may still be busy for a moment.
  const removed = await waitUntil(
    () => {
      for (const dir of subtree(root)) {
        try {
          rmdirSync(dir);
        } catch {
          // busy for a moment, or gone
        }
      }
      return subtree(root).length === 0;
    },
    timeoutMs,
    100,
  );
  if (!removed) throw new Error(`cgroup ${root}: could not remove ${subtree(root).join(", ")}`);
}
