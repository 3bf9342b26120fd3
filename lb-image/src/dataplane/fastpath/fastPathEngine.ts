// The nftables engine with the DSR fast path in front of it (lb-image/fastpath): every call goes to
// the engine, which keeps the whole kernel path in place; the fast path gets the DSR services it may
// carry (fastPathPlan.ts) after each apply, and the periodic verifications check it too (its program
// still attached, its maps as synced; the loader repairs what differs). The fast path is only an
// accelerator: while its loader is down (not started yet, refused by the kernel, crashed), packets
// take the kernel path, which picks the same backends; that is reported (log, Event, metric) and the
// loader is started again with a backoff.
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import { driftOf, type VerifyMode, type VerifyReport } from "../drift.ts";
import type { DataPlaneEngine, Inspection } from "../engine.ts";
import { serviceKey, type VirtualService, type VipCounter } from "../model.ts";
import type { RouteWatch } from "../routeWatch.ts";
import type { FastPath } from "./fastPath.ts";
import { FastPathPlanner, plannedKeys, type FastPathPlan } from "./fastPathPlan.ts";
import { LoaderSupervisor } from "./loaderSupervisor.ts";
import { packetCounter } from "./packetCounter.ts";

export interface FastPathEngineOptions {
  /** Starts the loader (FastPath.start with the binary and device); rejects with its reason. */
  start: () => Promise<FastPath>;
  log: Logger;
  registry: Registry;
  /** A problem an operator should see (an Event on the pod): the loader failed or died. */
  onProblem: (message: string) => void;
  /** First and longest wait before starting the loader again. */
  retryMs?: { first: number; max: number };
}

export class FastPathEngine implements DataPlaneEngine {
  readonly name = "nftables" as const;
  readonly #engine: DataPlaneEngine;
  readonly #o: FastPathEngineOptions;
  readonly #planner = new FastPathPlanner();
  readonly #up: Gauge;
  readonly #loader: LoaderSupervisor<FastPath>;
  /** The plan the engine last applied: what the fast path should carry. */
  #plan: FastPathPlan | undefined;
  /** The plan the loader last took (undefined: none since it started). */
  #synced: FastPathPlan | undefined;

  constructor(engine: DataPlaneEngine, o: FastPathEngineOptions) {
    this.#engine = engine;
    this.#o = o;
    this.#up = new Gauge({
      name: "portable_lb_fast_path_up",
      help: "1 while the DSR fast path's program carries this pod's DSR services (0: the kernel path does)",
      registers: [o.registry],
    });
    packetCounter({
      name: "portable_lb_fast_path_packets_total",
      help: "Packets to the fast path's DSR services it forwarded, and those it left to the kernel path (by reason)",
      registry: o.registry,
      read: async () => {
        const now = await this.#loader.current?.stats().catch(() => undefined);
        if (!now) return undefined;
        const passed = Object.entries(now.passed).map(([reason, n]) => [`passed:${reason}`, n]);
        return { forwarded: now.forwarded, ...Object.fromEntries(passed) } as Record<string, number>;
      },
    });
    this.#loader = new LoaderSupervisor({
      start: o.start,
      started: async () => {
        this.#synced = undefined;
        if (this.#plan) await this.#sync(this.#plan);
      },
      what: "DSR fast path",
      fallback: "the kernel path (nftables and VXLAN) carries the DSR services, choosing the same backends,",
      log: o.log,
      up: this.#up,
      onProblem: o.onProblem,
      ...(o.retryMs && { retryMs: o.retryMs }),
    });
  }

  async apply(desired: VirtualService[]) {
    const plan = this.#planner.plan(desired);
    // A service leaving the fast path (removed, or now restricted to source ranges: the firewall is
    // on the kernel path) leaves it before the engine changes anything, never after.
    const keep = plannedKeys(plan);
    const synced = this.#synced;
    if (synced && synced.services.some((s) => !keep.has(serviceKey(s))))
      await this.#sync({ ...synced, services: synced.services.filter((s) => keep.has(serviceKey(s))) });
    const result = await this.#engine.apply(desired);
    this.#plan = plan;
    if (this.#synced !== plan) await this.#sync(plan);
    return result;
  }

  inspect(mode: "quick" | "full"): Promise<Inspection> {
    return this.#engine.inspect(mode);
  }
  async repair(inspection: Inspection): Promise<VerifyReport> {
    return this.#withCheck(inspection.mode, await this.#engine.repair(inspection));
  }
  async verify(mode: VerifyMode): Promise<VerifyReport> {
    return this.#withCheck(mode, await this.#engine.verify(mode));
  }
  verified(): ReadonlySet<string> {
    return this.#engine.verified();
  }
  fullReadMs(): number | undefined {
    return this.#engine.fullReadMs();
  }
  fullReadAffordable(): boolean {
    return this.#engine.fullReadAffordable();
  }
  watch(onForeignChange: () => void, routes?: RouteWatch): void {
    this.#engine.watch(onForeignChange, routes);
  }
  unwatch(): void {
    this.#engine.unwatch();
  }
  services(): Promise<number> {
    return this.#engine.services();
  }

  /**
   * The kernel path's counters plus the flows the fast path took by its Maglev table: together the
   * new connections each service got (the drain waits for them to stop).
   */
  async counters(): Promise<VipCounter[]> {
    const counters = await this.#engine.counters();
    const fast = this.#loader.current;
    if (!fast) return counters;
    let flows: Record<string, number>;
    try {
      flows = (await fast.stats()).flows;
    } catch (err) {
      this.#o.log.warn({ err }, "fast path: could not read its counters; counting the kernel path's only");
      return counters;
    }
    return counters.map((c) => ({ ...c, connections: c.connections + (flows[serviceKey(c)] ?? 0) }));
  }

  /** Stops the loader (its program detaches; the kernel path carries on) and its restarts. */
  stop(): Promise<void> {
    return this.#loader.stop();
  }

  /** The periodic checks also check the fast path; an apply's own check does not (its sync did). */
  async #withCheck(mode: VerifyMode, report: VerifyReport): Promise<VerifyReport> {
    const fast = this.#loader.current;
    if (mode === "changed" || !fast || this.#synced !== this.#plan) return report;
    try {
      const { drift } = await fast.check();
      if (drift.length === 0) return report;
      this.#o.log.warn({ drift }, "fast path: found its program or maps changed; repaired them");
      return {
        ...report,
        drift: [...report.drift, ...drift.map((d) => driftOf("service", `fast path: ${d}`))],
        repaired: report.repaired + drift.length,
      };
    } catch (err) {
      this.#loader.lost(fast, `its check failed: ${String(err)}`);
      return report;
    }
  }

  async #sync(plan: FastPathPlan): Promise<void> {
    const fast = this.#loader.current;
    if (!fast) return;
    try {
      const { changes } = await fast.sync(plan.services, plan.backends);
      this.#synced = plan;
      this.#up.set(1);
      if (changes > 0) this.#o.log.debug({ changes, services: plan.services.length }, "fast path synced");
    } catch (err) {
      this.#loader.lost(fast, `it could not take the services: ${String(err)}`);
    }
  }
}
