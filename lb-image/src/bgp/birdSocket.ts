// One long-lived connection to BIRD's control socket, for the commands the controller repeats every
// tick (the session poll, ~7 times a second): a birdcl process per poll cost a fork of the ~200 MB
// controller each time. Speaks the socket's own protocol, as birdc does (BIRD's client/client.c):
// each answer line is "CODE-text" (more follows), " text" (a continuation) or "CODE text" (the last
// line); codes from 8000 are errors, 0000 is a bare "OK". Answers come out as birdc prints them,
// so the same parsers (birdOutput.ts) read both.
import { createConnection, type Socket } from "node:net";
import { CommandError } from "../dataplane/exec.ts";

interface Pending {
  lines: string[];
  resolve: (answer: string) => void;
  reject: (err: Error) => void;
}

const FINAL = /^\d{4} /;
const CODED = /^\d{4}[ -]/;

/** A line of BIRD's answer as birdc prints it; undefined for one birdc leaves out (codes 0000, async). */
export function birdcLine(line: string): string | undefined {
  if (line.startsWith(" ")) return line.slice(1);
  if (CODED.test(line)) return line.startsWith("0000") ? undefined : line.slice(5);
  if (line.startsWith("+")) return undefined; // asynchronous notice, not part of any answer
  return line;
}

export class BirdSocket {
  readonly path: string;
  private socket: Socket | undefined;
  /** Resolves once BIRD's greeting ("0001 BIRD … ready.") arrived on the current connection. */
  private ready: Promise<void> | undefined;
  private buffer = "";
  private readonly queue: Pending[] = [];
  /** Settles `ready`, until the greeting arrived or the connection failed. */
  private greeted: { resolve: () => void; reject: (err: Error) => void } | undefined;

  constructor(path: string) {
    this.path = path;
  }

  /**
   * Sends each command in turn on the one connection (made, or made again after BIRD restarted, on
   * demand); each one's answer, in order. Times out, and drops the connection, after `timeoutMs`.
   */
  async runAll(commands: string[], timeoutMs: number): Promise<string[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new CommandError(
          `BIRD's control socket ${this.path} did not answer within ${timeoutMs} ms`,
          "",
        );
        this.drop(err);
        reject(err);
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.send(commands), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the connection (the controller stops). */
  close(): void {
    this.drop(new CommandError(`BIRD's control socket ${this.path}: closed`, ""));
  }

  /**
   * One command at a time, as birdc sends them. BIRD answers in the order it reads, so the queue
   * pairs each answer with its command, also when two callers' commands are out at once.
   */
  private async send(commands: string[]): Promise<string[]> {
    await this.connect();
    const answers: string[] = [];
    for (const command of commands) {
      const socket = this.socket;
      if (!socket) throw new CommandError(`BIRD closed its control socket ${this.path}`, "");
      const answer = new Promise<string>((resolve, reject) =>
        this.queue.push({ lines: [], resolve, reject }),
      );
      socket.write(`${command}\n`);
      answers.push(await answer);
    }
    return answers;
  }

  private connect(): Promise<void> {
    if (this.ready) return this.ready;
    this.ready = new Promise<void>((resolve, reject) => {
      const socket = createConnection(this.path);
      this.socket = socket;
      this.buffer = "";
      this.greeted = { resolve, reject };
      socket.setEncoding("utf8");
      socket.unref(); // an idle connection must not keep a stopping process alive
      socket.on("data", (chunk: string) => this.received(chunk));
      // birdc's words for the same failures, which birdNotRunning() recognises.
      socket.on("error", (err: NodeJS.ErrnoException) => {
        const why =
          err.code === "ENOENT"
            ? "No such file or directory"
            : err.code === "ECONNREFUSED"
              ? "Connection refused"
              : err.message;
        this.drop(
          new CommandError(`Unable to connect to server control socket (${this.path}): ${why}`, why),
          socket,
        );
      });
      socket.on("close", () =>
        this.drop(new CommandError(`BIRD closed its control socket ${this.path}`, ""), socket),
      );
    });
    return this.ready;
  }

  private received(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 1);
      if (this.greeted) {
        // The first line is the greeting; nothing is asked before it.
        if (FINAL.test(line)) {
          this.greeted.resolve();
          this.greeted = undefined;
        }
        continue;
      }
      const pending = this.queue[0];
      if (!pending) continue;
      const printed = birdcLine(line);
      if (printed !== undefined) pending.lines.push(printed);
      if (FINAL.test(line)) {
        this.queue.shift();
        pending.resolve(pending.lines.length > 0 ? `${pending.lines.join("\n")}\n` : "");
      }
    }
  }

  /** Forgets the connection (`only` when it is still that one) and fails what waits on it. */
  private drop(err: Error, only?: Socket): void {
    if (only && this.socket !== only) return;
    this.socket?.destroy();
    this.socket = undefined;
    this.ready = undefined;
    this.greeted?.reject(err);
    this.greeted = undefined;
    for (const p of this.queue.splice(0)) p.reject(err);
  }
}
