// The kubelet's container restart back-off (client-go flowcontrol.Backoff as the kubelet uses it): the
// first restart is immediate, then each one waits for the previous delay doubled, from 10 s up to
// 5 minutes (CrashLoopBackOff), measured from when the container last finished. A container that
// stayed up for twice the cap starts over from the shortest delay.

export const INITIAL_BACKOFF_MS = 10_000;
export const MAX_BACKOFF_MS = 300_000;

interface Entry {
  delayMs: number;
  lastUpdate: number;
}

export class RestartBackOff {
  readonly #entries = new Map<string, Entry>();
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #now: () => number;

  constructor(initialMs = INITIAL_BACKOFF_MS, maxMs = MAX_BACKOFF_MS, now: () => number = Date.now) {
    this.#initialMs = initialMs;
    this.#maxMs = maxMs;
    this.#now = now;
  }

  #expired(e: Entry, finishedAt: number): boolean {
    return finishedAt - e.lastUpdate > this.#maxMs * 2;
  }

  /**
   * How long the container `key`, which finished at `finishedAt` (ms), must still wait before its
   * next start; 0 means start now, which also counts this restart toward the next delay.
   */
  waitMs(key: string, finishedAt: number): number {
    const e = this.#entries.get(key);
    if (e && !this.#expired(e, finishedAt)) {
      const left = finishedAt + e.delayMs - this.#now();
      if (left > 0) return left;
      e.delayMs = Math.min(e.delayMs * 2, this.#maxMs);
      e.lastUpdate = this.#now();
      return 0;
    }
    this.#entries.set(key, { delayMs: this.#initialMs, lastUpdate: this.#now() });
    return 0;
  }

  /** The delay the next crash of `key` will wait (for CrashLoopBackOff messages). */
  currentDelayMs(key: string): number {
    return this.#entries.get(key)?.delayMs ?? 0;
  }

  forget(prefix: string): void {
    for (const k of this.#entries.keys()) if (k.startsWith(prefix)) this.#entries.delete(k);
  }
}
