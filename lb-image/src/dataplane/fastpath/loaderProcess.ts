// A fast path loader as a child process (lb-image/fastpath/README.md): it says "ready" once its
// programs are loaded, then answers one JSON line per request, in order. Its programs detach when it
// exits; the kernel path underneath carries on alone. FastPath (the LB pod's) and NodeFastPath (the
// LB node's) add their requests.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";
import { z } from "zod";
import { withPrefix } from "../exec.ts";

const eventSchema = z.union([
  z.object({ event: z.literal("ready"), program: z.number(), hook: z.enum(["tcx", "tc"]) }),
  z.object({ event: z.literal("error"), error: z.string() }),
]);
const failureSchema = z.object({ ok: z.literal(false), error: z.string() });
// `skipped`: what the loader left to the kernel path, and why (the node loader's pods it could not attach).
const skipped = z.array(z.string()).default([]);
export const syncSchema = z.object({ ok: z.literal(true), changes: z.number(), skipped });
const checkSchema = z.object({ ok: z.literal(true), drift: z.array(z.string()), skipped });

const DEFAULT_TIMEOUT_MS = 10_000;
/** The loader's stderr kept for error messages. */
const STDERR_TAIL = 4096;

/**
 * The kernel hook the programs go on: tcx (Linux 6.6+), or a tc filter on the clsact qdisc for older
 * kernels; auto (the default) takes tcx where the kernel has it (lb-image/fastpath/attach.go).
 */
export type LoaderHook = "auto" | "tcx" | "tc";

export interface LoaderOptions {
  binary: string;
  /** Runs the binary through a prefix (e.g. `ip netns exec NS`); on a node, none. */
  prefix?: string[];
  timeoutMs?: number;
  hook?: LoaderHook;
}

interface Pending {
  resolve: (line: unknown) => void;
  reject: (err: Error) => void;
}

export class LoaderProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly timeoutMs: number;
  /** The request in flight: the loader answers in order, one at a time. */
  private pending: Pending | undefined;
  /** Requests wait here for the one before them. */
  private queue: Promise<unknown> = Promise.resolve();
  private exitError: Error | undefined;
  private closing = false;
  private readonly exitListeners: ((error: Error) => void)[] = [];
  private stderr = "";
  /** The attached program's id (as `bpftool prog show` lists it). */
  programId = 0;
  /** The hook its programs are attached with. */
  hook: "tcx" | "tc" = "tcx";

  constructor(child: ChildProcessWithoutNullStreams, timeoutMs: number) {
    this.child = child;
    this.timeoutMs = timeoutMs;
  }

  /**
   * Starts `binary ARGS` as `make` wraps it; resolves once it is ready, rejects with its error.
   */
  static launch<T extends LoaderProcess>(
    make: (child: ChildProcessWithoutNullStreams, timeoutMs: number) => T,
    o: LoaderOptions & { args: string[] },
  ): Promise<T> {
    const [command, ...prefixed] = withPrefix(o.prefix ?? [], o.binary);
    const args = [...prefixed, ...o.args, ...(o.hook ? ["--hook", o.hook] : [])];
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    const fp = make(child, o.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new Promise((resolve, reject) => {
      let ready = false;
      const timer = setTimeout(() => {
        child.kill();
        reject(new Error(`fast path loader not ready after ${fp.timeoutMs} ms${fp.stderrTail()}`));
      }, fp.timeoutMs);
      child.stderr.setEncoding("utf8").on("data", (d: string) => {
        fp.stderr = (fp.stderr + d).slice(-STDERR_TAIL);
      });
      child.stdin.on("error", () => undefined); // a dead loader: reported by "exit"
      createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
        const parsed = parseLine(line);
        if (!ready) {
          const ev = eventSchema.safeParse(parsed);
          if (!ev.success) return;
          clearTimeout(timer);
          if (ev.data.event === "ready") {
            ready = true;
            fp.programId = ev.data.program;
            fp.hook = ev.data.hook;
            resolve(fp);
          } else reject(new Error(`fast path loader: ${ev.data.error}`));
          return;
        }
        const p = fp.pending;
        fp.pending = undefined;
        p?.resolve(parsed);
      });
      child.on("error", (err) => {
        clearTimeout(timer);
        reject(new Error(`fast path loader ${o.binary}: ${err.message}`));
      });
      child.on("exit", (code, signal) => {
        clearTimeout(timer);
        const err = new Error(`fast path loader exited (${code ?? signal})${fp.stderrTail()}`);
        fp.exitError = err;
        fp.pending?.reject(err);
        fp.pending = undefined;
        if (!ready) reject(err);
        else if (!fp.closing) for (const cb of fp.exitListeners) cb(err);
      });
    });
  }

  /**
   * Reads the programs' maps and attachments back and repairs them; `drift` tells what was repaired,
   * `skipped` what could not be and is left to the kernel path.
   */
  async check(): Promise<{ drift: string[]; skipped: string[] }> {
    const r = await this.request({ op: "check" }, checkSchema);
    return { drift: r.drift, skipped: r.skipped };
  }

  /** `cb` learns that the loader died other than by close(): the kernel path carries everything. */
  onExit(cb: (error: Error) => void): void {
    this.exitListeners.push(cb);
  }

  /** Closes the loader's stdin (it detaches and exits); kills it if it has not exited in time. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.exitError !== undefined) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), this.timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  protected request<T>(body: object, schema: z.ZodType<T>): Promise<T> {
    const next = this.queue.then(() => this.send(body, schema));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private send<T>(body: object, schema: z.ZodType<T>): Promise<T> {
    if (this.exitError !== undefined) return Promise.reject(this.exitError);
    const op = (body as { op: string }).op;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        // An answer that comes later would be taken for the next request's: the loader is stuck, so end it.
        this.pending = undefined;
        this.child.kill("SIGKILL");
        reject(new Error(`fast path ${op}: no answer in ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending = {
        resolve: (line) => {
          clearTimeout(timer);
          const failure = failureSchema.safeParse(line);
          if (failure.success) {
            reject(new Error(`fast path ${op}: ${failure.data.error}`));
            return;
          }
          const ok = schema.safeParse(line);
          if (ok.success) resolve(ok.data);
          else reject(new Error(`fast path ${op}: unexpected answer ${JSON.stringify(line)}`));
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.child.stdin.write(`${JSON.stringify(body)}\n`);
    });
  }

  private stderrTail(): string {
    const tail = this.stderr.trim();
    return tail === "" ? "" : `: ${tail}`;
  }
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return line;
  }
}
