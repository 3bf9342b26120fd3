// Runs one async job at a time on demand: triggers that arrive while it runs make exactly one more
// run (bursts of watch events coalesce), and a failed run is retried after a pause. Used by the
// controller's reconciler and the node agent.
export interface RunnerHooks {
  /** A run finished; `sinceMs` is when the oldest trigger it served arrived (performance.now()). */
  onSuccess?: (sinceMs: number) => void;
  onError: (err: unknown) => void;
}

export class CoalescingRunner {
  private readonly job: () => Promise<void>;
  private readonly hooks: RunnerHooks;
  private readonly retryMs: number;
  private running = false;
  private again = false;
  private stopped = false;
  private pendingSince: number | undefined;
  private retry: NodeJS.Timeout | undefined;

  constructor(job: () => Promise<void>, hooks: RunnerHooks, retryMs = 1_000) {
    this.job = job;
    this.hooks = hooks;
    this.retryMs = retryMs;
  }

  /** Asks for a run; many calls before it starts make one run. */
  trigger(): void {
    if (this.stopped) return;
    this.pendingSince ??= performance.now();
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.loop());
  }

  /** Asks for a run after the retry pause: a job that succeeded but left part of its work undone. */
  later(): void {
    if (this.stopped) return;
    if (this.retry) clearTimeout(this.retry);
    this.retry = setTimeout(() => this.trigger(), this.retryMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      const since = this.pendingSince ?? performance.now();
      this.pendingSince = undefined;
      try {
        await this.job();
        this.hooks.onSuccess?.(since);
      } catch (err) {
        this.hooks.onError(err);
        this.later();
      }
    } while (this.again && !this.stopped);
    this.running = false;
  }
}
