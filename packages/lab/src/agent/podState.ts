// The agent's state folder: one folder per pod (`<state>/pods/<namespace>_<name>_<uid>/`) with its
// record (what runs and where: network namespace, veth, address, container processes by pid and
// start time), its volumes and each container's log. Records are written before what they describe
// is created, and replaced whole (write, then rename), so a restarted agent can adopt or clean up
// everything its previous run left, whatever moment it stopped at.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Terminated } from "./podStatus.ts";

export interface ProcessId {
  pid: number;
  /** Start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid, one process. */
  start: string;
}

export interface RunningContainer {
  /** The shim (sh) that waits for the container and writes its exit status. */
  shim: ProcessId;
  /** The container's first process (PID 1 of its PID namespace), once known. */
  init?: ProcessId;
  startedAt: string;
  containerID: string;
  /** What exec probes and hooks of an adopted container need: its environment and setpriv arguments. */
  env: Record<string, string>;
  setpriv: string[];
  /** Its probes' state, so that an agent restart neither makes it unready nor probes its start again. */
  started?: boolean;
  ready?: boolean;
}

export interface ContainerRecord {
  restartCount: number;
  running?: RunningContainer;
  /** How the last run ended (the status's state or lastState). */
  terminated?: Terminated;
  /** The run before that one's end, while `terminated` is the current state. */
  lastTerminated?: Terminated;
}

export interface PodRecord {
  uid: string;
  namespace: string;
  name: string;
  hostNetwork: boolean;
  /** `ip netns` name of the pod's network namespace (recorded before it is created). */
  netns?: string;
  /** The node side of the pod's veth. */
  hostVeth?: string;
  ip?: string;
  startTime?: string;
  containers: Record<string, ContainerRecord>;
}

export function podDirName(namespace: string, name: string, uid: string): string {
  return `${namespace}_${name}_${uid}`;
}

export function podsRoot(stateDir: string): string {
  return join(stateDir, "pods");
}

/** The per-container files in a pod's folder. */
export function containerFiles(podDir: string, container: string) {
  return {
    log: join(podDir, `${container}.log`),
    script: join(podDir, `${container}.sh`),
    exit: join(podDir, `${container}.exit`),
    error: join(podDir, `${container}.error`),
    terminationLog: join(podDir, `${container}.termination-log`),
  };
}

export function saveRecord(podDir: string, record: PodRecord): void {
  mkdirSync(podDir, { recursive: true, mode: 0o700 });
  const file = join(podDir, "pod.json");
  writeFileSync(`${file}.tmp`, JSON.stringify(record, null, 2));
  renameSync(`${file}.tmp`, file);
}

/** Every pod record in the state folder, with its folder. */
export function loadRecords(stateDir: string): { dir: string; record: PodRecord }[] {
  const root = podsRoot(stateDir);
  if (!existsSync(root)) return [];
  const out: { dir: string; record: PodRecord }[] = [];
  for (const name of readdirSync(root)) {
    const dir = join(root, name);
    try {
      out.push({ dir, record: JSON.parse(readFileSync(join(dir, "pod.json"), "utf8")) as PodRecord });
    } catch {
      // A folder whose record was never written holds nothing that runs: cleaned up as a stray.
      out.push({
        dir,
        record: {
          uid: name.split("_").at(-1) ?? name,
          namespace: "",
          name,
          hostNetwork: true,
          containers: {},
        },
      });
    }
  }
  return out;
}

/** The start time of a running process, or undefined when it is gone (or a zombie). */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") return undefined;
    // Fields after the command name start at field 3 (state); starttime is field 22.
    return fields[22 - 3];
  } catch {
    return undefined;
  }
}

export function alive(p: ProcessId | undefined): boolean {
  return p !== undefined && processStart(p.pid) === p.start;
}
