// Runs the data plane's command-line tools with stdin, bounded in time, with errors that carry the
// tool's own message (what an operator needs in the log and in the Event).
import { execFile, spawn } from "node:child_process";
import { setPriority } from "node:os";
import { createInterface } from "node:readline";

export class CommandError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(message);
    this.stderr = stderr;
  }
}

function failure(argv: string[], stderr: string, fallback: string): CommandError {
  return new CommandError(`${argv.join(" ")} failed: ${stderr.trim() || fallback}`, stderr);
}

/** Runs argv[0] with the rest as arguments, feeding `input` on stdin; `onPid` learns its process id. */
export function run(
  argv: [string, ...string[]],
  input = "",
  timeoutMs = 30_000,
  onPid?: (pid: number) => void,
): Promise<string> {
  const [command, ...args] = argv;
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          reject(failure(argv, stderr, err.message));
          return;
        }
        resolve(stdout);
      },
    );
    if (child.pid !== undefined) onPid?.(child.pid);
    // A command that exits without reading its input (`ip route show`) closes the pipe: EPIPE on
    // stdin is expected then, and the command's own exit status is what counts.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input);
  });
}

/**
 * Runs argv[0] and hands each line of its output to `onLine` as it arrives, so that a listing of
 * hundreds of megabytes is never one string in memory. Resolves when the command exits with 0.
 * `niceness` lowers the command's CPU priority (background work, such as a periodic listing that
 * takes nft seconds of CPU, must not hold back the changes applied beside it).
 */
export function runLines(
  argv: [string, ...string[]],
  onLine: (line: string) => void,
  timeoutMs = 120_000,
  niceness = 0,
): Promise<void> {
  const [command, ...args] = argv;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs });
    if (niceness > 0 && child.pid !== undefined) {
      try {
        setPriority(child.pid, niceness);
      } catch {
        // Best effort: it runs at normal priority then.
      }
    }
    let stderr = "";
    let parseError: Error | undefined;
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-64 * 1024)));
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
      if (parseError !== undefined) return;
      try {
        onLine(line);
      } catch (err) {
        parseError = err instanceof Error ? err : new Error(String(err));
        child.kill();
      }
    });
    child.on("error", (err) => reject(failure(argv, stderr, err.message)));
    child.on("close", (code, signal) => {
      if (parseError !== undefined) reject(parseError);
      else if (code === 0) resolve();
      else reject(failure(argv, stderr, `exit ${code ?? signal}`));
    });
  });
}

/** A tool's argv behind a command prefix (`ip netns exec NS` in tests; none in the pod). */
export function withPrefix(prefix: string[], tool: string): [string, ...string[]] {
  const [first = tool, ...rest] = [...prefix, tool];
  return [first, ...rest];
}
