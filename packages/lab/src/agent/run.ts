// The agent's one way to run a host command (ip, nsenter, curl, …): bounded in time, in its own
// process group so a timeout kills whatever the command started too, output captured.
import { spawn } from "node:child_process";
import { constants } from "node:os";

export interface RunOptions {
  timeoutMs?: number;
  /** The whole environment (nothing of the agent's is passed unless given). */
  env?: NodeJS.ProcessEnv;
}

export interface RunResult {
  /** Exit status; 128 + signal when killed, 124 on timeout, 127 when it could not start. */
  code: number;
  stdout: string;
  stderr: string;
}

export class CommandError extends Error {}

/** Never rejects: the outcome is in `code`. */
export function run(command: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: opts.env ?? process.env,
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // gone already
      }
    }, opts.timeoutMs ?? 30_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    let done = false;
    const finish = (code: number) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ code: timedOut ? 124 : code, stdout, stderr });
    };
    child.on("error", (err) => {
      stderr += err.message;
      finish(127);
    });
    child.on("close", (code, signal) => finish(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
}

/** Runs and returns stdout; throws CommandError with the command line and its stderr on failure. */
export async function runOk(command: string, args: readonly string[], opts?: RunOptions): Promise<string> {
  const r = await run(command, args, opts);
  if (r.code !== 0) {
    const why = r.code === 124 ? "timed out" : `exit ${r.code}`;
    throw new CommandError(`${[command, ...args].join(" ")} (${why}): ${(r.stderr || r.stdout).trim()}`);
  }
  return r.stdout;
}
