// A data-plane engine applies desired state to the kernel by diff. It reads the kernel once at
// start (adopting the rules a previous controller left, never flushing them), then diffs against
// what it last applied; after a failed apply it reads the kernel again, since it no longer knows.
import type { VipCounter, VirtualService } from "./model.ts";

export interface ApplyResult {
  /** Commands (ipvsadm lines or nft statements) sent; 0 when nothing changed. */
  changes: number;
}

export interface DataPlaneEngine {
  readonly name: "ipvs" | "nftables";
  apply(desired: VirtualService[]): Promise<ApplyResult>;
  /** What the kernel holds now, as the engine's own state (for metrics and tests). */
  services(): Promise<number>;
  /** Per-service connection counters, read from the kernel. */
  counters(): Promise<VipCounter[]>;
}

/** Wraps an engine's kernel state type S: read, diff, apply, remember. */
export abstract class DiffEngine<S> implements DataPlaneEngine {
  abstract readonly name: "ipvs" | "nftables";
  private current: S | undefined;

  protected abstract read(): Promise<S>;
  protected abstract render(desired: VirtualService[]): S;
  /**
   * The change from `current` to `desired` as scripts applied in order (usually one), and how
   * many statements they hold.
   */
  protected abstract diff(current: S, desired: S): { scripts: Iterable<string>; count: number };
  protected abstract write(script: string): Promise<void>;
  protected abstract count(state: S): number;
  abstract counters(): Promise<VipCounter[]>;

  async apply(desired: VirtualService[]): Promise<ApplyResult> {
    const current = this.current ?? (await this.read());
    const want = this.render(desired);
    const { scripts, count } = this.diff(current, want);
    if (count > 0) {
      try {
        for (const script of scripts) await this.write(script);
      } catch (err) {
        this.current = undefined; // unknown now: the next apply reads the kernel again
        throw err;
      }
    }
    this.current = want;
    return { changes: count };
  }

  async services(): Promise<number> {
    return this.count(this.current ?? (await this.read()));
  }
}
