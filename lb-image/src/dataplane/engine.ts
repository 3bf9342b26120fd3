// A data-plane engine applies desired state to the kernel by diff, and verifies it there. It reads
// the kernel strictly at start (adopting the rules a previous controller left, never flushing them,
// and replacing whatever it cannot recognise), then diffs against what it last applied; after a
// failed apply it reads the kernel again, since it no longer knows. Verification reads the kernel
// back, compares it with the last applied state and repairs the difference (by diff, or by
// rebuilding what a diff cannot fix); which services are verified right now is what the reconciler
// may announce.
import { RepairError, driftOf, type Drift, type VerifyMode, type VerifyReport } from "./drift.ts";
import type { VipCounter, VirtualService } from "./model.ts";

export interface ApplyResult {
  /** Commands (ipvsadm lines or nft statements) sent; 0 when nothing changed. */
  changes: number;
  /** What the read at start found and replaced (only the first apply, or one after a failure, reads). */
  drift: Drift[];
}

export interface DataPlaneEngine {
  readonly name: "ipvs" | "nftables";
  apply(desired: VirtualService[]): Promise<ApplyResult>;
  /**
   * Reads the kernel back as far as `mode` says, compares with the last applied state and repairs
   * any difference; throws a RepairError (with what it found) when the repair fails. Before the
   * first apply there is nothing to compare with, and it does nothing.
   */
  verify(mode: VerifyMode): Promise<VerifyReport>;
  /** Keys (serviceKey) of the services read back from the kernel as applied, and not changed since. */
  verified(): ReadonlySet<string>;
  /** How long the last full read of the kernel took (ms); undefined before the first. */
  fullReadMs(): number | undefined;
  /** What the kernel holds now, as the engine's own state (for metrics and tests). */
  services(): Promise<number>;
  /** Per-service connection counters, read from the kernel. */
  counters(): Promise<VipCounter[]>;
}

/** A full read of the kernel: the engine's state as found, and what differs from its own layout. */
export interface KernelRead<S> {
  state: S;
  drift: Drift[];
}

/** Scripts applied in order (usually one), and how many statements they hold. */
export interface Scripts {
  scripts: Iterable<string>;
  count: number;
}

/** Wraps an engine's kernel state type S: read, diff, apply, remember, verify. */
export abstract class DiffEngine<S> implements DataPlaneEngine {
  abstract readonly name: "ipvs" | "nftables";
  /** What the kernel is believed to hold; undefined: unknown, read it first. */
  private known: S | undefined;
  /** The state last applied: what the kernel should hold. */
  private applied: S | undefined;
  /** Services changed by an apply and not read back since. */
  private readonly pending = new Set<string>();
  /** Services (keys) found different and not repaired; "all" when the frame itself is. */
  private broken: Set<string> | "all" = "all";
  private lastFullReadMs: number | undefined;

  /** A full, strict read; never throws because of what it finds (that is drift). */
  protected abstract read(): Promise<KernelRead<S>>;
  protected abstract render(desired: VirtualService[]): S;
  protected abstract diff(current: S, desired: S): Scripts;
  /** Replaces everything with `desired` (what a diff cannot repair). */
  protected abstract rebuild(desired: S): Scripts;
  protected abstract write(script: string): Promise<void>;
  /** The keys of the services in `state`. */
  protected abstract keys(state: S): string[];
  /** The keys of the services that differ between two states (added, removed or changed). */
  protected abstract changed(current: S, desired: S): string[];
  /**
   * The engine's cheap read-back of `applied` ("changed": what every service relies on and what
   * changed; "quick": all it can see cheaply): the drift it sees. Undefined when the engine has none cheaper than a
   * full read.
   */
  protected abstract check(applied: S, mode: "changed" | "quick"): Promise<Drift[] | undefined>;
  /** Services changed or rebuilt since the last read: the engine forgets what it knew of them. */
  protected forget(_keys: Iterable<string> | "all"): void {}
  abstract counters(): Promise<VipCounter[]>;

  async apply(desired: VirtualService[]): Promise<ApplyResult> {
    const want = this.render(desired);
    let current = this.known;
    let drift: Drift[] = [];
    if (current === undefined) {
      const found = await this.timedRead();
      ({ state: current, drift } = found);
      // What the read found intact and this apply leaves alone is verified by that read.
      this.pending.clear();
      this.broken = drift.some((d) => d.rebuild) ? "all" : new Set();
    }
    const rebuild = drift.some((d) => d.rebuild);
    const changed = rebuild ? this.keys(want) : this.changed(current, want);
    const { scripts, count } = rebuild ? this.rebuild(want) : this.diff(current, want);
    for (const key of changed) this.pending.add(key);
    this.forget(rebuild ? "all" : changed);
    if (count > 0) await this.send(scripts);
    if (rebuild) this.broken = new Set();
    this.known = want;
    this.applied = want;
    return { changes: count, drift };
  }

  async verify(mode: VerifyMode): Promise<VerifyReport> {
    const started = performance.now();
    const applied = this.applied;
    const report = (r: Omit<VerifyReport, "durationMs">): VerifyReport => ({
      ...r,
      durationMs: performance.now() - started,
    });
    if (applied === undefined) return report({ drift: [], repaired: 0, rebuilt: false, full: false });
    if (mode !== "full" && this.broken !== "all") {
      const seen = await this.check(applied, mode);
      if (seen?.length === 0) {
        this.pending.clear();
        return report({ drift: [], repaired: 0, rebuilt: false, full: false });
      }
    }
    const found = await this.timedRead();
    const drift = [...found.drift];
    const rebuilt = drift.some((d) => d.rebuild);
    const differing = rebuilt ? this.keys(applied) : this.changed(found.state, applied);
    const named = new Set(drift.map((d) => d.subject));
    for (const key of differing)
      if (!rebuilt && !named.has(key))
        drift.push(driftOf("service", `service ${key} differs from what was applied`, key));
    const { scripts, count } = rebuilt ? this.rebuild(applied) : this.diff(found.state, applied);
    if (count === 0) {
      this.known = found.state;
      this.pending.clear();
      this.broken = new Set();
      return report({ drift, repaired: 0, rebuilt, full: true });
    }
    this.forget(rebuilt ? "all" : differing);
    try {
      await this.send(scripts);
      // A repair counts once read back: what the kernel holds now, not what was sent.
      const after = await this.timedRead();
      const left = [
        ...after.drift,
        ...this.changed(after.state, applied).map((k) => driftOf("service", `service ${k} still differs`, k)),
      ];
      if (left.length > 0) {
        this.known = undefined;
        throw new Error(`the kernel still differs after the repair: ${left.map((d) => d.detail).join("; ")}`);
      }
      this.known = after.state;
    } catch (err) {
      this.broken = rebuilt || drift.some((d) => d.subject === undefined) ? "all" : new Set(differing);
      throw new RepairError(
        `repair failed: ${err instanceof Error ? err.message : String(err)}`,
        report({ drift, repaired: 0, rebuilt, full: true }),
        { cause: err },
      );
    }
    this.pending.clear();
    this.broken = new Set();
    return report({ drift, repaired: count, rebuilt, full: true });
  }

  verified(): ReadonlySet<string> {
    const broken = this.broken;
    if (this.applied === undefined || broken === "all") return new Set();
    return new Set(this.keys(this.applied).filter((k) => !this.pending.has(k) && !broken.has(k)));
  }

  fullReadMs(): number | undefined {
    return this.lastFullReadMs;
  }

  async services(): Promise<number> {
    return this.keys(this.known ?? (await this.read()).state).length;
  }

  private async timedRead(): Promise<KernelRead<S>> {
    const started = performance.now();
    const found = await this.read();
    this.lastFullReadMs = performance.now() - started;
    return found;
  }

  private async send(scripts: Iterable<string>): Promise<void> {
    try {
      for (const script of scripts) await this.write(script);
    } catch (err) {
      this.known = undefined; // unknown now: the next apply reads the kernel again
      throw err;
    }
  }
}
