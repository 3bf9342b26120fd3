// One run of one container. The agent starts a shim (sh) in its own process group, in the pod's
// network namespace (`ip netns exec`) and new UTS and PID namespaces (`unshare`); the shim's one
// child is the launch script (containerLaunch.ts) in a mount namespace of its own, which becomes the
// container's command, PID 1 of its PID namespace as in a real container (so SIGTERM reaches it only if it handles SIGTERM, and
// when it dies the kernel kills everything else it started). The shim writes the exit status to a
// file and does nothing else, so a container outlives an agent restart and the next agent still
// learns how it ended. Every signal goes to a recorded pid whose start time still matches.
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { alive, processStart, type ProcessId, type RunningContainer } from "./podState.ts";
import { run } from "./run.ts";

export interface ExitInfo {
  exitCode: number;
  /** The launch script failed before the command ran (mounts, working dir): reason StartError. */
  setupError?: string;
  /** No exit status was recorded (its shim was killed by someone else): reason ContainerStatusUnknown. */
  lost?: string;
  finishedAt: Date;
}

const LOST = "the container's shim was killed, so its exit status is unknown";

export interface SpawnTools {
  ip: string;
  unshare: string;
  sh: string;
  nsenter: string;
  setpriv: string;
}

export interface StartSpec {
  tools: SpawnTools;
  /** The pod's network namespace; undefined for hostNetwork pods (the node's, the agent's own). */
  netns?: string;
  /** False for hostPID pods: the container shares the node's PID namespace. */
  pidNamespace: boolean;
  script: string;
  logFile: string;
  exitFile: string;
  errorFile: string;
  env: Record<string, string>;
  setpriv: string[];
  containerID: string;
}

const ADOPTED_POLL_MS = 1_000;

function readExit(exitFile: string, errorFile: string): ExitInfo | undefined {
  if (!existsSync(exitFile)) return undefined;
  const code = Number(readFileSync(exitFile, "utf8").trim());
  const setupError = existsSync(errorFile) ? readFileSync(errorFile, "utf8").trim() : undefined;
  return {
    exitCode: Number.isInteger(code) ? code : 128,
    ...(setupError && { setupError }),
    finishedAt: statSync(exitFile).mtime,
  };
}

function signal(p: ProcessId | undefined, sig: NodeJS.Signals): void {
  if (!alive(p)) return;
  try {
    process.kill(p!.pid, sig);
  } catch {
    // exited meanwhile
  }
}

/**
 * The command line that runs `argv` inside the container whose PID 1 is `pid` (its mount, UTS, PID
 * and network namespaces, its working directory), as its user and capabilities (`setpriv`).
 */
export function execInContainerArgs(
  tools: SpawnTools,
  pid: number,
  setpriv: string[],
  argv: string[],
): string[] {
  return [
    tools.nsenter,
    ...[`--target=${pid}`, "--mount", "--uts", "--pid", "--net", "--wd", "--"],
    ...[tools.setpriv, ...setpriv, "--", ...argv],
  ];
}

/** The first child of `pid` (the shim's container process), waiting a little for the fork. */
async function firstChild(shim: ProcessId): Promise<ProcessId | undefined> {
  for (let i = 0; i < 100 && alive(shim); i++) {
    let text: string;
    try {
      text = readFileSync(`/proc/${shim.pid}/task/${shim.pid}/children`, "utf8").trim();
    } catch {
      return undefined;
    }
    const pid = Number(text.split(" ")[0]);
    const start = pid ? processStart(pid) : undefined;
    if (pid && start) return { pid, start };
    await sleep(20);
  }
  return undefined;
}

export class ContainerProcess {
  readonly running: RunningContainer;
  readonly exited: Promise<ExitInfo>;
  readonly #exitFile: string;
  readonly #errorFile: string;
  #killed = false;
  #done: ExitInfo | undefined;

  private constructor(
    running: RunningContainer,
    exitFile: string,
    errorFile: string,
    shimGone: Promise<void>,
  ) {
    this.running = running;
    this.#exitFile = exitFile;
    this.#errorFile = errorFile;
    this.exited = shimGone.then(() => {
      // No status file: the shim itself was killed. Make sure the container went with it.
      signal(this.running.init, "SIGKILL");
      this.#done = readExit(this.#exitFile, this.#errorFile) ?? {
        exitCode: 137,
        ...(!this.#killed && { lost: LOST }),
        finishedAt: new Date(),
      };
      return this.#done;
    });
  }

  /** Starts the container; resolves once its first process exists (or it has already exited). */
  static async start(spec: StartSpec): Promise<ContainerProcess> {
    rmSync(spec.exitFile, { force: true });
    rmSync(spec.errorFile, { force: true });
    const t = spec.tools;
    // The shim forks exactly once (its child becomes PID 1 of the new PID namespace; a second fork
    // would fail once that one is gone), and `echo` is a builtin. The container gets a mount
    // namespace of its own (the inner unshare execs, so it is still PID 1): its mounts, a read-only
    // root included, never reach the shim, which must still write the exit status.
    const container = [t.unshare, "--mount", "--propagation", "private", "--", t.sh, spec.script];
    const shim = [
      ...[t.unshare, "--uts", ...(spec.pidNamespace ? ["--pid"] : []), "--"],
      ...[t.sh, "-c", '"$@"; echo $? > "$0"', spec.exitFile, ...container],
    ];
    const argv = spec.netns ? [t.ip, "netns", "exec", spec.netns, ...shim] : shim;
    const log = openSync(spec.logFile, "a", 0o600);
    let child;
    try {
      child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ["ignore", log, log], env: spec.env });
    } finally {
      closeSync(log);
    }
    const shimGone = new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
    const startedAt = new Date().toISOString();
    const shimId: ProcessId = { pid: child.pid ?? -1, start: (child.pid && processStart(child.pid)) || "" };
    const running: RunningContainer = {
      shim: shimId,
      startedAt,
      containerID: spec.containerID,
      env: spec.env,
      setpriv: spec.setpriv,
    };
    const proc = new ContainerProcess(running, spec.exitFile, spec.errorFile, shimGone);
    const init = await firstChild(shimId);
    if (init) running.init = init;
    return proc;
  }

  /** Follows a container a previous agent started; undefined if its shim is gone (see `exitOf`). */
  static adopt(running: RunningContainer, exitFile: string, errorFile: string): ContainerProcess | undefined {
    if (!alive(running.shim)) return undefined;
    const shimGone = (async () => {
      while (alive(running.shim)) await sleep(ADOPTED_POLL_MS);
    })();
    return new ContainerProcess(running, exitFile, errorFile, shimGone);
  }

  /** How a container whose shim is gone ended, from its status file (137 if there is none). */
  static exitOf(running: RunningContainer, exitFile: string, errorFile: string): ExitInfo {
    signal(running.init, "SIGKILL");
    return readExit(exitFile, errorFile) ?? { exitCode: 137, lost: LOST, finishedAt: new Date() };
  }

  get done(): ExitInfo | undefined {
    return this.#done;
  }

  /** SIGTERM to the container's PID 1, SIGKILL after `graceMs`; resolves with how it ended. */
  async stop(graceMs: number): Promise<ExitInfo> {
    if (this.#done) return this.#done;
    signal(this.running.init, "SIGTERM");
    const ended = await Promise.race([this.exited, sleep(Math.max(0, graceMs)).then(() => undefined)]);
    return ended ?? this.kill();
  }

  /**
   * SIGKILL to PID 1 (the kernel then kills the rest of its PID namespace), then to the shim's
   * process group for what a hostPID container left; resolves once the shim is gone.
   */
  async kill(): Promise<ExitInfo> {
    this.#killed = true;
    signal(this.running.init, "SIGKILL");
    const ended = await Promise.race([this.exited, sleep(2_000).then(() => undefined)]);
    if (alive(this.running.shim)) {
      try {
        process.kill(-this.running.shim.pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    return ended ?? this.exited;
  }

  /**
   * Runs `argv` inside the container (its mount, UTS, PID and network namespaces, as its user and
   * capabilities, with its environment): what exec probes and hooks do.
   */
  async exec(
    tools: SpawnTools,
    argv: string[],
    timeoutMs: number,
  ): Promise<{ code: number; output: string }> {
    const { init, setpriv, env } = this.running;
    if (!alive(init)) return { code: 126, output: "the container is not running" };
    const [nsenter, ...args] = execInContainerArgs(tools, init!.pid, setpriv, argv);
    const r = await run(nsenter!, args, { timeoutMs, env });
    return { code: r.code, output: (r.stdout + r.stderr).slice(-4096) };
  }
}
