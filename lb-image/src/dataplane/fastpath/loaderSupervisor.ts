// Keeps a fast path loader running: starts it, hands each new one to its owner to be brought up to
// date, and when it fails to start, dies or is given up on (`lost`), reports the problem (log, the
// owner's Event, the `up` gauge at 0: the kernel path carries everything meanwhile) and starts it
// again with a backoff.
import type { Logger } from "pino";
import type { Gauge } from "prom-client";
import type { LoaderProcess } from "./loaderProcess.ts";

export interface LoaderSupervisorOptions<T extends LoaderProcess> {
  /** Starts the loader; rejects with its reason. */
  start: () => Promise<T>;
  /** Brings a new loader up to date (its failures call lost() themselves). */
  started: (loader: T) => Promise<void>;
  /** What is down, for messages: "DSR fast path". */
  what: string;
  /** Who carries the traffic while it is down, for messages: "the kernel path carries ...". */
  fallback: string;
  log: Logger;
  /** 0 while the loader is down; the owner sets 1 once it carries what it should. */
  up: Gauge;
  /** A problem an operator should see (an Event): the loader failed or died. */
  onProblem: (message: string) => void;
  /** First and longest wait before starting the loader again. */
  retryMs?: { first: number; max: number };
}

const RETRY_MS = { first: 2_000, max: 300_000 };

export class LoaderSupervisor<T extends LoaderProcess> {
  readonly #o: LoaderSupervisorOptions<T>;
  #loader: T | undefined;
  #retry: NodeJS.Timeout | undefined;
  #retryMs: number;
  #stopped = false;

  constructor(o: LoaderSupervisorOptions<T>) {
    this.#o = o;
    this.#retryMs = this.#limits().first;
    o.up.set(0);
    void this.#start();
  }

  /** The running loader, if any. */
  get current(): T | undefined {
    return this.#loader;
  }

  /** Gives up on `loader` (if it is still the current one) for `why`, and starts another later. */
  lost(loader: T, why: string): void {
    if (this.#loader !== loader) return;
    this.#loader = undefined;
    void loader.close();
    this.#problem(why);
    if (!this.#stopped) this.#later();
  }

  /** Stops the loader (its programs detach) and its restarts. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const loader = this.#loader;
    this.#loader = undefined;
    this.#o.up.set(0);
    await loader?.close();
  }

  async #start(): Promise<void> {
    if (this.#stopped) return;
    let loader: T;
    try {
      loader = await this.#o.start();
    } catch (err) {
      this.#problem(`could not start: ${err instanceof Error ? err.message : String(err)}`);
      return this.#later();
    }
    if (this.#stopped) return void loader.close();
    this.#loader = loader;
    loader.onExit((err) => this.lost(loader, `its loader exited: ${err.message}`));
    this.#o.log.info(`${this.#o.what} started (attached with ${loader.hook})`);
    this.#retryMs = this.#limits().first;
    await this.#o.started(loader);
  }

  #problem(why: string): void {
    this.#o.up.set(0);
    const message = `${this.#o.what} ${why}; ${this.#o.fallback} until it is back (retried in ${Math.round(this.#retryMs / 1000)} s)`;
    this.#o.log.warn(message);
    this.#o.onProblem(message);
  }

  #later(): void {
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => void this.#start(), this.#retryMs);
    this.#retry.unref();
    this.#retryMs = Math.min(this.#retryMs * 2, this.#limits().max);
  }

  #limits() {
    return this.#o.retryMs ?? RETRY_MS;
  }
}
