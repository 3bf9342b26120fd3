// When the data plane is next read back: a cheap check every half second or so, and a full read as
// often as its cost allows. Both intervals follow what the last read cost (costFactor × its duration
// for the cheap check, twice that for a full read, so the two take at most ~15% of a core), never
// shorter than minIntervalMs for the cheap check and twice that for a full read: with drift seen
// within ~0.5 s (cheap check) or ~1 s (full read) and repaired in well under a second, drift to
// repaired stays under the 2 s target on small tables. Measured on
// a 2-core machine with nft 1.0.6: a full read of 10 services takes ~20 ms (every 1 s), of 1,000
// services × 10 endpoints 2.3 s (every ~46 s), of 10,000 32 s (every ~11 min); the cheap check
// ~15 ms at 10 services, ~70 ms at 1,000 and ~0.6 s at 10,000 (every 0.5 s, ~0.7 s and ~6 s).
import type { VerifyMode } from "./drift.ts";

export interface VerifyScheduleOptions {
  /** Asks the single writer (the reconciler's runner) for a run; it then asks `due()`. */
  trigger: () => void;
  minIntervalMs?: number;
  costFactor?: number;
  /** Whether a scheduled full read may run now (the engine's fullReadAffordable); a suspected change still gets one. */
  fullReads?: () => boolean;
}

export class VerifySchedule {
  private readonly trigger: () => void;
  private readonly minIntervalMs: number;
  private readonly costFactor: number;
  private readonly fullReads: () => boolean;
  private nextQuick = 0;
  private nextFull = 0;
  /** A change was reported that only a full read started after it can judge. */
  private suspected = false;
  /** A change was reported that a cheap check started after it can judge. */
  private asked = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(o: VerifyScheduleOptions) {
    this.trigger = o.trigger;
    this.minIntervalMs = o.minIntervalMs ?? 500;
    this.costFactor = o.costFactor ?? 10;
    this.fullReads = o.fullReads ?? (() => true);
  }

  start(): void {
    this.stop();
    this.arm();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The verification due now, if any (a full read when both are); the caller starts it. */
  take(now = performance.now()): "quick" | "full" | undefined {
    if (this.suspected || (now >= this.nextFull && this.fullReads())) {
      this.suspected = this.asked = false;
      return "full";
    }
    if (!this.asked && now < this.nextQuick) return undefined;
    this.asked = false;
    return "quick";
  }

  /**
   * A verification ran (or failed); `mode` is how far it went ("full" when a cheap check found
   * something and read everything). The next ones are spaced by what reads cost.
   */
  done(mode: VerifyMode, durationMs: number, fullReadMs: number | undefined, now = performance.now()): void {
    const after = (min: number, cost: number) => now + Math.max(min, cost);
    if (mode === "full") {
      this.nextFull = after(2 * this.minIntervalMs, 2 * this.costFactor * (fullReadMs ?? durationMs));
      this.nextQuick = after(this.minIntervalMs, 0);
    } else if (mode === "quick") {
      this.nextQuick = after(this.minIntervalMs, this.costFactor * durationMs);
    }
    if (this.timer) this.arm();
  }

  /** Something changed what a cheap check reads (the routes): one now (or after the one under way). */
  soon(): void {
    this.asked = true;
    this.trigger();
  }

  /** Something changed the kernel behind our back: a full read now (or after the one under way). */
  suspect(): void {
    this.suspected = true;
    this.trigger();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    const nextFull = this.fullReads() ? this.nextFull : Infinity;
    const wait = this.asked ? 0 : Math.max(0, Math.min(this.nextQuick, nextFull) - performance.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.trigger();
      // Re-armed by done(); until the run reports, wait a minimum interval rather than spin.
      this.timer = setTimeout(() => this.arm(), this.minIntervalMs);
      this.timer.unref();
    }, wait);
    this.timer.unref();
  }
}
