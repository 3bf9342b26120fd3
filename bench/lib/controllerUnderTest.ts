// Starts bench/controllerProcess.mjs as a child process and watches it: its JSON log lines as they
// arrive (each with pino's own timestamp), its /metrics, and its memory from /proc.
import { spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { request } from "node:http";
import { createInterface } from "node:readline";
import { CONTROLLER_MEMORY } from "@portable-lb/core/config";
import { killNow, stopProcess } from "@portable-lb/lab";

const MARKER = "controllerProcess.mjs";

export interface LogLine {
  /** Epoch milliseconds, when the controller wrote the line. */
  time: number;
  msg: string;
  [field: string]: unknown;
}

export interface ControllerArgs {
  /** bench/controllerProcess.mjs */
  entry: string;
  configFile: string;
  kubeconfig: string;
  netns: string;
  port: number;
  logFile: string;
  /** Folder for `node --cpu-prof` profiles; none when omitted. */
  cpuProfileDir?: string;
}

export interface Memory {
  /** /proc/<pid>/status VmRSS and VmHWM (peak), in bytes. */
  rss: number;
  peakRss: number;
  /**
   * /proc/<pid>/smaps_rollup LazyFree: pages the process freed with MADV_FREE (V8 returns heap
   * pages so), still counted in RSS until the kernel needs them, as under a container's limit.
   */
  lazyFree: number;
}

interface Waiter {
  match: (line: LogLine) => boolean;
  resolve: (line: LogLine) => void;
}

export class ControllerUnderTest {
  readonly pid: number;
  readonly port: number;
  readonly startedAt: number;
  #exited = false;
  #waiters: Waiter[] = [];
  readonly #last = new Map<string, LogLine>();
  #lastLineAt = Date.now();

  constructor(args: ControllerArgs) {
    // The heap flags the pod runs the controller with (its NODE_OPTIONS), so memory is the pod's.
    const flags = CONTROLLER_MEMORY.nodeOptions.split(" ");
    if (args.cpuProfileDir) flags.push("--cpu-prof", `--cpu-prof-dir=${args.cpuProfileDir}`);
    const log = createWriteStream(args.logFile, { flags: "a" });
    this.startedAt = Date.now();
    // Its own process group: a Ctrl-C reaches the benchmark, which stops it in order.
    const child = spawn(
      process.execPath,
      [
        ...flags,
        args.entry,
        ...["--config", args.configFile, "--kubeconfig", args.kubeconfig, "--netns", args.netns],
        ...["--port", String(args.port)],
      ],
      { detached: true, stdio: ["ignore", "pipe", "pipe"] },
    );
    if (child.pid === undefined) throw new Error("the controller process could not be started");
    this.pid = child.pid;
    this.port = args.port;
    child.on("exit", () => (this.#exited = true));
    child.stderr.pipe(log, { end: false });
    createInterface({ input: child.stdout }).on("line", (text) => {
      log.write(`${text}\n`);
      this.#lastLineAt = Date.now();
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        return;
      }
      this.#last.set(line.msg, line);
      const matched = this.#waiters.filter((w) => w.match(line));
      if (matched.length === 0) return;
      this.#waiters = this.#waiters.filter((w) => !matched.includes(w));
      for (const w of matched) w.resolve(line);
    });
  }

  get exited(): boolean {
    return this.#exited;
  }

  /** The latest log line with this message, if any. */
  lastLine(msg: string): LogLine | undefined {
    return this.#last.get(msg);
  }

  /** When the controller last wrote a log line (epoch ms). */
  get lastLineAt(): number {
    return this.#lastLineAt;
  }

  /**
   * The first log line from now on that `match`es. Register it before causing the line, so that
   * an answer arriving before the promise is awaited is not missed.
   */
  nextLine(match: (line: LogLine) => boolean, timeoutMs: number): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new Error(`no matching controller log line within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const waiter: Waiter = {
        match,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  metrics(): Promise<string> {
    return this.#get("/metrics").then((r) => r.body);
  }

  async ready(): Promise<boolean> {
    return (await this.#get("/readyz").catch(() => ({ status: 0 }))).status === 200;
  }

  memory(): Memory {
    const status = readFileSync(`/proc/${this.pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
    const rollup = readFileSync(`/proc/${this.pid}/smaps_rollup`, "utf8");
    const lazyKb = Number(/^LazyFree:\s+(\d+) kB/m.exec(rollup)?.[1] ?? NaN);
    return { rss: kb("VmRSS") * 1024, peakRss: kb("VmHWM") * 1024, lazyFree: lazyKb * 1024 };
  }

  /** SIGTERM (the controller stops its watches and exits), SIGKILL after 20 s. */
  stop(): Promise<void> {
    return stopProcess(this.pid, MARKER, 20_000);
  }

  /** For exit handlers. */
  killNow(): void {
    killNow(this.pid, MARKER);
  }

  #get(path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: this.port, path, timeout: 10_000 }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
      req.on("error", reject);
      req.end();
    });
  }
}
