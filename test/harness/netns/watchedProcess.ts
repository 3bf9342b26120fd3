// A process a test starts inside a lab namespace and follows to its exit status: what an entrypoint
// test needs beyond LabNamespace.spawn (whose daemons are detached and report no exit code). It can
// run as PID 1 of a PID namespace of its own, as a container's command does, where a signal the
// process has no handler for is dropped. Output goes to a log file in the lab's folder; the lab's
// destroy() kills whatever is left in its namespaces.
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type LabNamespace, lastLines, waitUntil } from "@portable-lb/lab";

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WatchOptions {
  /** Added to the environment (the whole environment with `inheritEnv: false`). */
  env?: NodeJS.ProcessEnv;
  /** Whether the process gets this process's environment too (default true). */
  inheritEnv?: boolean;
  /** Run as PID 1 of a new PID namespace (`unshare --pid --fork`), as in a container. */
  asPid1?: boolean;
}

export interface WatchedProcess {
  logFile: string;
  /** Resolves when the process has exited. */
  exited: Promise<ExitStatus>;
  /** Undefined while it runs. */
  status(): ExitStatus | undefined;
  /** The command's pid (with asPid1: PID 1 of its namespace, as the host sees it); undefined once gone. */
  mainPid(): Promise<number | undefined>;
  /** Sends `signal` to the command and resolves with its exit status, or undefined if it still runs after `withinMs`. */
  signal(signal: NodeJS.Signals, withinMs: number): Promise<ExitStatus | undefined>;
  /** Ensures it is gone: SIGKILL if it still runs. */
  kill(): Promise<void>;
  lastLines(n?: number): string;
}

/** The exit status if the process exits within `ms`, else undefined. */
export function exitWithin(exited: Promise<ExitStatus>, ms: number): Promise<ExitStatus | undefined> {
  return Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);
}

/** The first child of `pid` (unshare's forked command), once it exists. */
async function childOf(pid: number): Promise<number | undefined> {
  let child: number | undefined;
  await waitUntil(() => {
    try {
      child =
        Number(readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(" ")[0]) || undefined;
    } catch {
      child = undefined;
    }
    return child !== undefined;
  }, 5_000);
  return child;
}

export function startWatched(
  ns: LabNamespace,
  logDir: string,
  name: string,
  argv: readonly string[],
  opts: WatchOptions = {},
): WatchedProcess {
  const logFile = join(logDir, `${ns.name}-${name}.log`);
  const log = openSync(logFile, "a");
  // `ip netns exec` execs the command, so the pid is the command's own (or unshare's, which passes
  // the command's exit status on and kills it if unshare is killed).
  const pid1 = opts.asPid1 ? ["unshare", "--pid", "--fork", "--kill-child"] : [];
  const child = spawn("ip", ["netns", "exec", ns.netns, ...pid1, ...argv], {
    stdio: ["ignore", log, log],
    env: opts.inheritEnv === false ? opts.env : { ...process.env, ...opts.env },
  });
  closeSync(log);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${ns.netns}: ${name} (${argv[0]}) could not be started`);
  const exited = new Promise<ExitStatus>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return followed(logFile, exited, {
    mainPid: () => (opts.asPid1 ? childOf(pid) : Promise.resolve(pid)),
    kill: () => void child.kill("SIGKILL"),
  });
}

/**
 * A WatchedProcess from its log, its exit and two ways in: where its main process is (asked only
 * while it runs) and how to kill it. The rest follows.
 */
export function followed(
  logFile: string,
  exited: Promise<ExitStatus>,
  how: { mainPid: () => Promise<number | undefined>; kill: () => Promise<void> | void },
): WatchedProcess {
  let status: ExitStatus | undefined;
  // Registered first, so whoever awaits `exited` sees status() set.
  const done = exited.then((s) => (status = s));
  const mainPid = async () => (status ? undefined : await how.mainPid());
  return {
    logFile,
    exited: done,
    status: () => status,
    mainPid,
    async signal(sig, withinMs) {
      const target = await mainPid();
      if (!status && target !== undefined) process.kill(target, sig);
      return exitWithin(done, withinMs);
    },
    async kill() {
      if (status) return;
      await how.kill();
      await exitWithin(done, 5_000);
    },
    lastLines: (n = 20) => lastLines(logFile, n),
  };
}
