// A container run by `runc run` in the foreground and followed to its exit status, as a test follows
// a process (WatchedProcess): its output goes to a log file, its init is the container's PID 1 (a
// signal it has no handler for is dropped, as on a node), and runc deletes the container (its state
// and cgroups) when that process exits. `kill()` is the runtime's SIGKILL, then a delete by id.
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { constants } from "node:os";
import { waitUntil, type ExecResult } from "@portable-lb/lab";
import { exitWithin, followed, type ExitStatus, type WatchedProcess } from "../netns/watchedProcess.ts";
import { runc, writeBundle, type RuncContainerOptions } from "./runcContainer.ts";

export interface RuncProcess extends WatchedProcess {
  readonly id: string;
  /** Runs `argv` in the running container as its process runs (user, capabilities, no_new_privs). */
  exec(argv: string[], timeoutMs?: number): Promise<ExecResult>;
}

/** runc exits 128 + n when the container's process was killed by signal n. */
function exitStatus(code: number | null, signal: NodeJS.Signals | null): ExitStatus {
  if (code === null || code <= 128) return { code, signal };
  const name = Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0];
  return name ? { code: null, signal: name as NodeJS.Signals } : { code, signal };
}

export interface RunPlaces {
  rootfs: string;
  /** Where the bundle is written. */
  dir: string;
  /** runc's state folder (one may hold several containers). */
  root: string;
  /** The container's output is appended here. */
  logFile: string;
}

/** Writes the bundle and starts the container. */
export function runContainer(
  o: RuncContainerOptions,
  { rootfs, dir, root, logFile }: RunPlaces,
): RuncProcess {
  const bundle = writeBundle(o, rootfs, dir, root);
  const log = openSync(logFile, "a");
  const child = spawn("runc", ["--root", root, "run", "--bundle", bundle, o.id], {
    stdio: ["ignore", log, log],
  });
  closeSync(log);
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once("exit", (code, signal) => resolve(exitStatus(code, signal)));
    child.once("error", () => resolve({ code: 127, signal: null }));
  });
  let initPid: number | undefined;
  let gone = false;
  void exited.then(() => (gone = true));
  const proc = followed(logFile, exited, {
    async mainPid() {
      // runc records the container's init once it has created it: moments after the start.
      await waitUntil(
        async () => {
          if (initPid !== undefined || gone) return true;
          const r = await runc(root, ["state", o.id]);
          const pid = r.code === 0 ? (JSON.parse(r.stdout) as { pid: number }).pid : 0;
          if (pid > 0) initPid = pid;
          return initPid !== undefined;
        },
        10_000,
        20,
      );
      return initPid;
    },
    async kill() {
      await runc(root, ["kill", o.id, "KILL"]);
      if ((await exitWithin(exited, 10_000)) === undefined) child.kill("SIGKILL");
    },
  });
  return {
    ...proc,
    id: o.id,
    async kill() {
      await proc.kill();
      // Gone already when runc cleaned up after its process; this catches a runc that could not.
      await runc(root, ["delete", "--force", o.id]);
    },
    exec: (argv, timeoutMs = 30_000) => runc(root, ["exec", o.id, ...argv], timeoutMs),
  };
}
