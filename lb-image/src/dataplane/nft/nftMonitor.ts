// `nft monitor` in the pod's network namespace: tells at once when a process other than the
// engine's own nft runs commits a change to the engine's table, so drift is read back and repaired
// without waiting for the next scheduled read. nft prints each committed change, then
// `# new generation N by process PID (COMM)`; a generation whose events touched our table and whose
// PID is not one of our writes is someone else's. Restarted with backoff when it dies (and the
// table is read back then: changes may have gone unseen meanwhile).
//
// nft 1.0.6's monitor keeps its own copy of the whole ruleset (measured: ~1 KB per lookup slot,
// 270 MB at 1,000 services × 10 endpoints), so the engine runs it only while its table is small
// (see NFT_MONITOR_MAX_SLOTS); larger tables rely on the scheduled cheap check and full reads.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { NFT_TABLE } from "./nftState.ts";

/** Lookup slots (summed over services) up to which the monitor runs: ~35 MB of nft's memory. */
export const NFT_MONITOR_MAX_SLOTS = 32_768;

const GENERATION = /^# new generation \d+ by process (\d+)/;
const OURS = ` ip ${NFT_TABLE} `;

export interface NftMonitorOptions {
  nft: [string, ...string[]];
  /** Whether `pid` is one of the engine's own nft writes. */
  isOwn: (pid: number) => boolean;
  /** Someone else changed the table (or the monitor restarted and may have missed it). */
  onForeignChange: () => void;
  onError?: (err: Error) => void;
  maxBackoffMs?: number;
}

export class NftMonitor {
  private readonly o: NftMonitorOptions;
  private child: ChildProcess | undefined;
  private running = false;
  private backoffMs = 1_000;
  private restart: NodeJS.Timeout | undefined;

  constructor(o: NftMonitorOptions) {
    this.o = o;
  }

  get active(): boolean {
    return this.running;
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
  }

  private spawn(): void {
    const [command, ...args] = this.o.nft;
    const child = spawn(command, [...args, "monitor"], { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    const started = performance.now();
    let touched = false;
    // What happened before it listened may have gone unseen.
    this.o.onForeignChange();
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
      const generation = GENERATION.exec(line);
      if (!generation) {
        touched ||= line.includes(OURS);
        return;
      }
      if (touched && !this.o.isOwn(Number(generation[1]))) this.o.onForeignChange();
      touched = false;
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4_096)));
    child.on("error", (err) => this.o.onError?.(err));
    child.on("close", (code, signal) => {
      if (this.child !== child || !this.running) return;
      this.o.onError?.(new Error(`nft monitor exited (${code ?? signal}): ${stderr.trim()}`));
      // One that ran for a while died of something new: start again soon.
      if (performance.now() - started > 10_000) this.backoffMs = 1_000;
      this.restart = setTimeout(() => this.spawn(), this.backoffMs);
      this.restart.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, this.o.maxBackoffMs ?? 30_000);
    });
  }
}
