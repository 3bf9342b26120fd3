// Polls a router namespace's kernel FIB for one prefix every few milliseconds through one
// long-lived `ip -j -batch -` process (ip answers each command line at once in JSON mode), and
// lets callers wait for the first poll whose next-hop set satisfies a condition.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { parseNextHops } from "@portable-lb/lab";

interface Waiter {
  match: (hops: string[]) => boolean;
  resolve: (at: number | undefined) => void;
  timer: NodeJS.Timeout;
}

export class FibPoller {
  readonly #child: ChildProcess;
  readonly #command: string;
  readonly #timer: NodeJS.Timeout;
  #waiters: Waiter[] = [];
  #inFlight = false;
  #lastAnswer = 0;
  /** Milliseconds between successive answers: the real polling interval. */
  readonly gaps: number[] = [];
  hops: string[] = [];

  constructor(netns: string, prefix: string, everyMs = 10) {
    this.#command = `route show exact ${prefix}\n`;
    this.#child = spawn("ip", ["-n", netns, "-j", "-batch", "-"], { stdio: ["pipe", "pipe", "inherit"] });
    createInterface({ input: this.#child.stdout! }).on("line", (line) => this.#answer(line));
    this.#timer = setInterval(() => {
      if (this.#inFlight) return;
      this.#inFlight = true;
      this.#child.stdin!.write(this.#command);
    }, everyMs);
  }

  #answer(line: string): void {
    const now = performance.now();
    this.#inFlight = false;
    if (this.#lastAnswer) this.gaps.push(now - this.#lastAnswer);
    this.#lastAnswer = now;
    this.hops = parseNextHops(line).map((h) => h.gateway);
    const done = this.#waiters.filter((w) => w.match(this.hops));
    if (done.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => !done.includes(w));
    for (const w of done) {
      clearTimeout(w.timer);
      w.resolve(now);
    }
  }

  /** The time (performance.now()) of the first poll from now on that matches; undefined on timeout. */
  waitFor(match: (hops: string[]) => boolean, timeoutMs: number): Promise<number | undefined> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        match,
        resolve,
        timer: setTimeout(() => {
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          resolve(undefined);
        }, timeoutMs),
      };
      this.#waiters.push(waiter);
    });
  }

  stop(): void {
    clearInterval(this.#timer);
    for (const w of this.#waiters) {
      clearTimeout(w.timer);
      w.resolve(undefined);
    }
    this.#waiters = [];
    this.#child.stdin!.end();
    this.#child.kill();
  }
}
