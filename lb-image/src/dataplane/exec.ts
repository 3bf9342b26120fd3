// Runs the data plane's command-line tools with stdin, bounded in time, with errors that carry the
// tool's own message (what an operator needs in the log and in the Event).
import { execFile } from "node:child_process";

export class CommandError extends Error {
  readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(message);
    this.stderr = stderr;
  }
}

/** Runs argv[0] with the rest as arguments, feeding `input` on stdin. */
export function run(argv: [string, ...string[]], input = "", timeoutMs = 30_000): Promise<string> {
  const [command, ...args] = argv;
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new CommandError(`${command} ${args.join(" ")} failed: ${stderr.trim() || err.message}`, stderr),
          );
          return;
        }
        resolve(stdout);
      },
    );
    // A command that exits without reading its input (`ip route show`) closes the pipe: EPIPE on
    // stdin is expected then, and the command's own exit status is what counts.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input);
  });
}

/** A tool's argv behind a command prefix (`ip netns exec NS` in tests; none in the pod). */
export function withPrefix(prefix: string[], tool: string): [string, ...string[]] {
  const [first = tool, ...rest] = [...prefix, tool];
  return [first, ...rest];
}
