// A long-running command whose output lines are news of a kernel change (`nft monitor`,
// `ip monitor`): each line goes to `onLine`. When it dies it is started again with backoff, and each
// start is reported (`onStart`), since changes made while nothing listened went unseen.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

export interface CommandMonitorOptions {
  command: [string, ...string[]];
  /** It (re)started: what happened before it listened may have gone unseen. */
  onStart: () => void;
  onLine: (line: string) => void;
  /** It wrote to stderr while running: it may have lost news (e.g. `ip monitor` on a netlink overrun). */
  onStderr?: (text: string) => void;
  onError?: (err: Error) => void;
  maxBackoffMs?: number;
}

export class CommandMonitor {
  private readonly o: CommandMonitorOptions;
  private child: ChildProcess | undefined;
  private running = false;
  private listening = false;
  private backoffMs = 1_000;
  private restart: NodeJS.Timeout | undefined;

  constructor(o: CommandMonitorOptions) {
    this.o = o;
  }

  /** Its command runs now: no change goes unreported. */
  get live(): boolean {
    return this.listening;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.spawn();
  }

  stop(): void {
    this.running = false;
    if (this.restart) clearTimeout(this.restart);
    this.child?.kill();
    this.child = undefined;
    this.listening = false;
  }

  private spawn(): void {
    const [command, ...args] = this.o.command;
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const started = performance.now();
    this.listening = true;
    this.o.onStart();
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => this.o.onLine(line));
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr = (stderr + d).slice(-4_096);
      this.o.onStderr?.(d);
    });
    child.on("error", (err) => this.o.onError?.(err));
    child.on("close", (code, signal) => {
      if (this.child !== child || !this.running) return;
      this.listening = false;
      this.o.onError?.(new Error(`${this.o.command.join(" ")} exited (${code ?? signal}): ${stderr.trim()}`));
      // One that ran for a while died of something new: start again soon.
      if (performance.now() - started > 10_000) this.backoffMs = 1_000;
      this.restart = setTimeout(() => this.spawn(), this.backoffMs);
      this.restart.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, this.o.maxBackoffMs ?? 30_000);
    });
  }
}
