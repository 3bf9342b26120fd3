// A data-plane engine applies desired state to the kernel by diff, and verifies it there. It reads
// the kernel strictly at start (adopting the rules a previous controller left, never flushing them,
// and replacing whatever it cannot recognise), then diffs against what it last applied; after a
// failed apply it reads the kernel again, since it no longer knows. Verification reads the kernel
// back, compares it with the last applied state and repairs the difference (by diff, or by
// rebuilding what a diff cannot fix); which services are verified right now is what the reconciler
// may announce.
import { RepairError, driftOf, type Drift, type VerifyMode, type VerifyReport } from "./drift.ts";
import type { Firewall } from "./firewall/sourceRangeFirewall.ts";
import { serviceKey, type VipCounter, type VirtualService } from "./model.ts";
import type { RouteWatch } from "./routeWatch.ts";

export interface ApplyResult {
  /** Commands (ipvsadm lines or nft statements) sent; 0 when nothing changed. */
  changes: number;
  /** What the read at start found and replaced (only the first apply, or one after a failure, reads). */
  drift: Drift[];
  /** How long that full read took (ms), when this apply made one. */
  readMs?: number;
}

export interface DataPlaneEngine {
  readonly name: "ipvs" | "nftables";
  apply(desired: VirtualService[]): Promise<ApplyResult>;
  /**
   * Reads the kernel back as far as `mode` says ("quick" or "full"), without writing: safe beside
   * apply (no need to hold the single writer while a large table is listed). A full read gives up
   * after 3× the last one's time (at least 5 s): nft starts a listing over whenever a change lands
   * under it, and with steady changes on a large table it may never end; make it in the writer then.
   */
  inspect(mode: "quick" | "full"): Promise<Inspection>;
  /**
   * In the single writer: compares what `inspect` read with the last applied state, leaving out
   * services applied since the read began, and repairs the difference (by diff, or by rebuilding
   * what a diff cannot fix), reading the repair back. Throws a RepairError (with what it found) when
   * the repair fails. Before the first apply there is nothing to compare with, and it does nothing.
   */
  repair(inspection: Inspection): Promise<VerifyReport>;
  /** inspect and repair in one, in the single writer ("changed": after an apply). */
  verify(mode: VerifyMode): Promise<VerifyReport>;
  /** Keys (serviceKey) of the services read back from the kernel as applied, and not changed since. */
  verified(): ReadonlySet<string>;
  /** How long the last full read of the kernel took (ms); undefined before the first. */
  fullReadMs(): number | undefined;
  /** Whether a scheduled full read fits in the container now (the reader's memory grows with the state). */
  fullReadAffordable(): boolean;
  /**
   * Calls `onForeignChange` when the kernel tells of a change to the engine's state by someone
   * else (nftables' monitor, while the table is small enough; IPVS tells nothing). `routes` tells
   * when what the engine keeps in the namespace's routes (the DSR tunnels) needs a read-back.
   * Until unwatch().
   */
  watch(onForeignChange: () => void, routes?: RouteWatch): void;
  unwatch(): void;
  /** What the kernel holds now, as the engine's own state (for metrics and tests). */
  services(): Promise<number>;
  /** Per-service connection counters, read from the kernel. */
  counters(): Promise<VipCounter[]>;
}

/** What a read-back saw; only the engine that made it can repair from it. */
export interface Inspection {
  readonly mode: VerifyMode;
  readonly drift: readonly Drift[];
  readonly durationMs: number;
}

/** A full read of the kernel: the engine's state as found, and what differs from its own layout. */
export interface KernelRead<S> {
  state: S;
  drift: Drift[];
}

/** Scripts applied in order (usually one), and how many statements they hold. */
export interface Scripts<S = string> {
  scripts: Iterable<S>;
  count: number;
}

/** Every engine's state is a list of services, each known by protocol, VIP and port. */
type ServiceId = Pick<VirtualService, "protocol" | "vip" | "port">;

class EngineInspection<T> implements Inspection {
  readonly owner: object;
  readonly mode: VerifyMode;
  readonly drift: readonly Drift[];
  readonly durationMs: number;
  /** The engine's write count when the read began. */
  readonly generation: number;
  /** A full read; none for a cheap check. */
  readonly found: KernelRead<T[]> | undefined;

  constructor(i: Omit<EngineInspection<T>, "found"> & { found?: KernelRead<T[]> }) {
    this.owner = i.owner;
    this.mode = i.mode;
    this.drift = i.drift;
    this.durationMs = i.durationMs;
    this.generation = i.generation;
    this.found = i.found;
  }
}

/**
 * Wraps an engine's kernel state (a list of services T): read, diff, apply, remember, verify. A
 * script S is what one write sends (text for one tool, unless the engine drives several). Beside
 * it, for both engines alike, the source-range firewall (firewall/): applied before the engine's
 * own writes, so a restricted service's first packet already meets it, and read back with the
 * engine's full reads (and its cheap ones while nothing tells of foreign changes).
 */
export abstract class DiffEngine<T extends ServiceId, S = string> implements DataPlaneEngine {
  abstract readonly name: "ipvs" | "nftables";
  private readonly firewall: Firewall;
  /** What the kernel is believed to hold; undefined: unknown, read it first. */
  private known: T[] | undefined;
  /** The state last applied: what the kernel should hold. */
  private applied: T[] | undefined;
  /** Services changed by an apply and not read back since. */
  private readonly pending = new Set<string>();
  /** Services (keys) found different and not repaired; "all" when the frame itself is. */
  private broken: Set<string> | "all" = "all";
  private lastFullReadMs: number | undefined;
  /**
   * Counts writes, so that a read made beside them is judged fairly: a service written after the
   * read began (`touched`) is not compared, and a read older than the last rebuild is dropped.
   */
  private generation = 0;
  private readonly touched = new Map<string, number>();
  private rebuiltAt = 0;

  /** `firewall`: the source-range firewall in the data plane's namespace (SourceRangeFirewall). */
  constructor(firewall: Firewall) {
    this.firewall = firewall;
  }

  /**
   * A full, strict read; never throws because of what it finds (that is drift). `timeoutMs` bounds
   * one made beside writes (nft restarts a listing whenever the ruleset changes under it).
   */
  protected abstract read(timeoutMs?: number): Promise<KernelRead<T[]>>;
  protected abstract render(desired: VirtualService[]): T[];
  protected abstract diff(current: T[], desired: T[]): Scripts<S>;
  /** Replaces everything with `desired` (what a diff cannot repair). */
  protected abstract rebuild(desired: T[]): Scripts<S>;
  protected abstract write(script: S): Promise<void>;
  /** The keys of the services that differ between two states (added, removed or changed). */
  protected abstract changed(current: T[], desired: T[]): string[];
  /**
   * The engine's cheap read-back of `applied` ("changed": what every service relies on and the
   * services in `changed`; "quick": all it can see cheaply): the drift it sees. Undefined when the engine has none
   * cheaper than a full read.
   */
  protected abstract check(
    applied: T[],
    mode: "changed" | "quick",
    changed: ReadonlySet<string>,
  ): Promise<Drift[] | undefined>;
  /** Services changed or rebuilt since the last read: the engine forgets what it knew of them. */
  protected forget(_keys: Iterable<string> | "all"): void {}
  /** The state just applied (by an apply or a repair). */
  protected onApplied(_state: T[]): void {}
  watch(_onForeignChange: () => void, _routes?: RouteWatch): void {}
  unwatch(): void {}
  /** Whether something tells at once of foreign changes (then only full reads check the firewall). */
  protected watched(): boolean {
    return false;
  }
  abstract counters(): Promise<VipCounter[]>;

  async apply(desired: VirtualService[]): Promise<ApplyResult> {
    const firewall = await this.firewall.apply(desired);
    const want = this.render(desired);
    let current = this.known;
    let drift: Drift[] = [];
    let readMs: number | undefined;
    if (current === undefined) {
      const found = await this.timedRead();
      readMs = this.lastFullReadMs;
      ({ state: current, drift } = found);
      // What the read found intact and this apply leaves alone is verified by that read.
      this.pending.clear();
      this.broken = drift.some((d) => d.rebuild) ? "all" : new Set();
    }
    const rebuild = drift.some((d) => d.rebuild);
    const changed = rebuild ? want.map(serviceKey) : this.changed(current, want);
    const { scripts, count } = rebuild ? this.rebuild(want) : this.diff(current, want);
    for (const key of changed) this.pending.add(key);
    if (count > 0) await this.send(scripts, rebuild ? "all" : changed);
    if (rebuild) this.broken = new Set();
    this.known = want;
    this.applied = want;
    this.onApplied(want);
    return {
      changes: count + firewall.changes,
      drift: [...firewall.drift, ...drift],
      ...(readMs !== undefined && { readMs }),
    };
  }

  inspect(mode: "quick" | "full"): Promise<Inspection> {
    // Beside writes, a large listing may restart again and again (nft starts over whenever the
    // ruleset changes under it): bounded, and the caller then reads in the single writer.
    // Whole milliseconds: child_process refuses a fractional timeout.
    return this.inspectWithin(mode, Math.max(5_000, Math.ceil(3 * (this.lastFullReadMs ?? 0))));
  }

  private async inspectWithin(mode: "quick" | "full", timeoutMs?: number): Promise<Inspection> {
    const started = performance.now();
    const generation = this.generation;
    const applied = this.applied;
    const inspection = (mode: VerifyMode, drift: Drift[], found?: KernelRead<T[]>) =>
      new EngineInspection<T>({
        owner: this,
        mode,
        drift,
        durationMs: performance.now() - started,
        generation,
        found,
      });
    if (applied === undefined) return inspection(mode, []);
    if (mode === "quick" && this.broken !== "all") {
      const seen = await this.check(applied, "quick", this.pending);
      if (seen !== undefined) return inspection("quick", seen);
    }
    const found = await this.timedRead(timeoutMs);
    return inspection("full", found.drift, found);
  }

  async repair(inspection: Inspection): Promise<VerifyReport> {
    const full = inspection.mode === "full";
    const firewall = full || !this.watched() ? await this.firewall.check(full) : undefined;
    const report = await this.repairServices(inspection);
    if (!firewall?.drift.length) return report;
    return {
      ...report,
      drift: [...firewall.drift, ...report.drift],
      repaired: report.repaired + firewall.repaired,
    };
  }

  private async repairServices(inspection: Inspection): Promise<VerifyReport> {
    if (!(inspection instanceof EngineInspection) || inspection.owner !== this)
      throw new Error("repair() takes an inspection this engine made");
    const i = inspection as EngineInspection<T>;
    const started = performance.now() - i.durationMs;
    // A read beside a write may see some of the engine's tools before it and some after (IPVS's
    // `-Sn` and its nft table are two reads): drift it cannot pin on a service written meanwhile
    // is judged again by a read in the writer, not rebuilt on.
    if (i.found && this.generation !== i.generation && i.found.drift.some((d) => d.subject === undefined))
      return this.repairFrom(await this.timedRead(), this.generation, started);
    if (i.found) return this.repairFrom(i.found, i.generation, started);
    const moved = this.generation !== i.generation;
    if (i.drift.length > 0 && !moved)
      return this.repairFrom(await this.timedRead(), this.generation, started);
    // Clean (or inconclusive: written meanwhile, and the next check decides).
    if (i.drift.length === 0)
      for (const key of this.pending) if (!this.isStale(key, i.generation)) this.pending.delete(key);
    return { drift: [], repaired: 0, rebuilt: false, full: false, durationMs: performance.now() - started };
  }

  async verify(mode: VerifyMode): Promise<VerifyReport> {
    if (mode !== "changed") return this.repair(await this.inspectWithin(mode));
    const started = performance.now();
    const applied = this.applied;
    if (applied === undefined) return { drift: [], repaired: 0, rebuilt: false, full: false, durationMs: 0 };
    if (this.broken !== "all" && (await this.check(applied, "changed", this.pending))?.length === 0) {
      this.pending.clear();
      return { drift: [], repaired: 0, rebuilt: false, full: false, durationMs: performance.now() - started };
    }
    return this.repairFrom(await this.timedRead(), this.generation, started);
  }

  verified(): ReadonlySet<string> {
    const broken = this.broken;
    if (this.applied === undefined || broken === "all") return new Set();
    return new Set(this.applied.map(serviceKey).filter((k) => !this.pending.has(k) && !broken.has(k)));
  }

  fullReadMs(): number | undefined {
    return this.lastFullReadMs;
  }

  fullReadAffordable(): boolean {
    return true;
  }

  async services(): Promise<number> {
    return (this.known ?? (await this.read()).state).length;
  }

  private isStale(key: string, generation: number): boolean {
    return (this.touched.get(key) ?? 0) > generation;
  }

  /** Compares a full read (begun at `generation`) with the last applied state and repairs the difference. */
  private async repairFrom(
    found: KernelRead<T[]>,
    generation: number,
    started: number,
  ): Promise<VerifyReport> {
    const applied = this.applied;
    const report = (r: Omit<VerifyReport, "durationMs">): VerifyReport => ({
      ...r,
      durationMs: performance.now() - started,
    });
    // Nothing applied yet, or the table was rebuilt after this read began: nothing to judge by it.
    if (applied === undefined || this.rebuiltAt > generation)
      return report({ drift: [], repaired: 0, rebuilt: false, full: true });
    // Services written after the read began are newer than what it saw: taken as applied.
    const stale = (key: string) => this.isStale(key, generation);
    const state = [
      ...found.state.filter((s) => !stale(serviceKey(s))),
      ...applied.filter((s) => stale(serviceKey(s))),
    ];
    const drift = found.drift.filter((d) => d.subject === undefined || !stale(d.subject));
    const rebuilt = drift.some((d) => d.rebuild);
    const differing = rebuilt ? applied.map(serviceKey) : this.changed(state, applied);
    const named = new Set(drift.map((d) => d.subject));
    for (const key of differing)
      if (!rebuilt && !named.has(key))
        drift.push(driftOf("service", `service ${key} differs from what was applied`, key));
    const { scripts, count } = rebuilt ? this.rebuild(applied) : this.diff(state, applied);
    if (count === 0) {
      // As applied (no difference): keep the applied objects, not a second copy of every table.
      if (generation === this.generation) this.known = applied;
      for (const key of this.pending) if (!stale(key)) this.pending.delete(key);
      this.broken = new Set();
      return report({ drift, repaired: 0, rebuilt, full: true });
    }
    try {
      await this.send(scripts, rebuilt ? "all" : differing);
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

  private async timedRead(timeoutMs?: number): Promise<KernelRead<T[]>> {
    const started = performance.now();
    const found = await this.read(timeoutMs);
    this.lastFullReadMs = performance.now() - started;
    return found;
  }

  /** Sends scripts in order; `keys` are the services they touch. */
  private async send(scripts: Iterable<S>, keys: Iterable<string> | "all"): Promise<void> {
    const generation = ++this.generation;
    if (keys === "all") this.rebuiltAt = generation;
    else for (const key of keys) this.touched.set(key, generation);
    this.forget(keys);
    try {
      for (const script of scripts) await this.write(script);
    } catch (err) {
      this.known = undefined; // unknown now: the next apply reads the kernel again
      throw err;
    }
  }
}
