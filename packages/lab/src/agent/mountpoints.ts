// Mountpoints that do not exist on this machine (/var/run/secrets/kubernetes.io/serviceaccount, a
// ConfigMap's /etc/app, /dev/termination-log, …). Every container's mounts live in its own mount
// namespace and vanish with it, but a mountpoint is a directory (or file) on the one filesystem all
// node namespaces share, so it has to exist there while mounted. Shadowing its parent with a tmpfs
// instead would hide what the parent holds (all of /run, say). So a container creates the missing
// ones itself and records each in a machine-wide registry, and whoever cleans up after a pod removes
// the recorded ones that no mount namespace on the machine uses any more (and that are empty). One
// lock, the registry folder itself (flock), covers creating-and-mounting and checking-and-removing,
// so one node's clean-up never removes a mountpoint another node's container is about to mount.
import { spawn } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  rmdirSync,
} from "node:fs";
import { join } from "node:path";

/** Shared by every lab agent on the machine (a registry of one node would miss the others' mounts). */
export const REGISTRY_DIR = "/run/portable-lb-lab-agent/mountpoints";

export interface ChainStep {
  path: string;
  file: boolean;
}

/** Each path from the first component to `target`, e.g. /a/b → /a, /a/b (the last a file if `file`). */
export function mountpointChain(target: string, file: boolean): ChainStep[] {
  const parts = target.split("/").filter((p) => p !== "" && p !== ".");
  return parts.map((_, i) => ({
    path: `/${parts.slice(0, i + 1).join("/")}`,
    file: file && i === parts.length - 1,
  }));
}

/** A registry file name for a path: reversible, one name per path. */
export function registryName(path: string): string {
  return path.replace(/%/g, "%25").replace(/\//g, "%2F");
}

export function pathOfRegistryName(name: string): string {
  return name.replace(/%2F/g, "/").replace(/%25/g, "%");
}

/** Mount points (field 5) in a /proc/<pid>/mountinfo text, with its octal escapes undone. */
export function mountPointsOf(mountinfo: string): string[] {
  return mountinfo
    .split("\n")
    .filter((l) => l !== "")
    .map((l) =>
      (l.split(" ")[4] ?? "").replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))),
    );
}

/** Every mount point of every mount namespace on the machine (each namespace read once). */
function mountPointsEverywhere(): Set<string> {
  const seen = new Set<string>();
  const points = new Set<string>();
  for (const pid of readdirSync("/proc").filter((p) => /^[0-9]+$/.test(p))) {
    try {
      const ns = readlinkSync(`/proc/${pid}/ns/mnt`);
      if (seen.has(ns)) continue;
      seen.add(ns);
      for (const p of mountPointsOf(readFileSync(`/proc/${pid}/mountinfo`, "utf8"))) points.add(p);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return points;
}

/** Runs `fn` holding the registry lock (flock(1) holds it for us: Node has no flock). */
async function withRegistryLock<T>(flockPath: string, fn: () => T): Promise<T> {
  mkdirSync(REGISTRY_DIR, { recursive: true });
  const holder = spawn(flockPath, [REGISTRY_DIR, "sh", "-c", "echo locked; read _"], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      holder.stdout.once("data", () => resolve());
      holder.once("error", reject);
      holder.once("exit", (code) => reject(new Error(`flock ${REGISTRY_DIR} exited with ${code}`)));
    });
    return fn();
  } finally {
    // Closing its input ends `read`, which releases the lock (also if this process dies).
    holder.stdin.end();
    holder.stdout.destroy();
  }
}

/**
 * Removes the recorded mountpoints that nothing mounts any more and that are empty, deepest first.
 * Returns the paths it removed.
 */
export async function removeUnusedMountpoints(flockPath: string): Promise<string[]> {
  if (!existsSync(REGISTRY_DIR)) return [];
  return withRegistryLock(flockPath, () => {
    const inUse = mountPointsEverywhere();
    const removed: string[] = [];
    const names = readdirSync(REGISTRY_DIR).sort(
      (a, b) => pathOfRegistryName(b).length - pathOfRegistryName(a).length,
    );
    for (const name of names) {
      const path = pathOfRegistryName(name);
      let real: string | undefined;
      try {
        real = realpathSync(path);
      } catch {
        rmSync(join(REGISTRY_DIR, name), { force: true }); // already gone
        continue;
      }
      if (inUse.has(real) || [...inUse].some((p) => p.startsWith(`${real}/`))) continue;
      try {
        const st = lstatSync(path);
        if (st.isDirectory()) rmdirSync(path);
        else if (st.isFile() && st.size === 0) rmSync(path);
        else continue;
      } catch {
        continue; // not empty: someone put something there; it stays recorded
      }
      rmSync(join(REGISTRY_DIR, name), { force: true });
      removed.push(path);
    }
    return removed;
  });
}
