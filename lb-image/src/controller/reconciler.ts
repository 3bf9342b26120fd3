// The control loop: whenever Services or EndpointSlices change, compute the desired state and
// apply it by diff. Bursts of changes coalesce into one run. A failed run leaves the last good
// rules in place and is retried; nothing is applied before the caches have synced, so a start
// without the API server never replaces adopted rules with an empty state.
//
// The same runner (the one writer to the kernel) reads the data plane back: after each change, and
// on the VerifySchedule's ticks, repairing any drift toward the last applied state (also while the
// API server is away). Only VIPs whose every service and local route were read back as applied are
// verified, and only those are announced.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import { RepairError, countByKind, type VerifyMode, type VerifyReport } from "../dataplane/drift.ts";
import type { DataPlaneEngine, Inspection } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import { serviceKey, type VirtualService } from "../dataplane/model.ts";
import { VerifySchedule } from "../dataplane/verifySchedule.ts";
import { desiredState, isOurs, type DesiredStateCache, type SkippedItem } from "./desiredState.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { allocate, type Allocation } from "./vipAllocator.ts";
import { announcedVips } from "../bgp/announcements.ts";
import { CoalescingRunner } from "../common/coalescingRunner.ts";
import { sameItems } from "../common/sameItems.ts";
import type { HealthChecker } from "../health/healthChecker.ts";

export interface ClusterView {
  synced(): boolean;
  services(): V1Service[];
  slices(): V1EndpointSlice[];
}

export interface ReconcilerDeps {
  config: LbConfig;
  view: ClusterView;
  engine: DataPlaneEngine;
  localVips: LocalVips;
  metrics: ControllerMetrics;
  log: Logger;
  report: (problems: SkippedItem[]) => Promise<void>;
  /** Writes allocations into Service status; only the elected allocator has one. */
  writeStatus?: (svc: V1Service, vips: string[]) => Promise<void>;
  isLeader: () => boolean;
  /** Active health checks; the reconciler tells it what to check and reads its verdicts. */
  health?: HealthChecker;
  /** BGP mode: announces the VIPs the data plane can serve now (see bgp/announcements.ts). */
  announce?: (vips: string[]) => Promise<unknown>;
  /** Called when the set of verified VIPs changes (after the run that changed it). */
  onVerifiedChange?: (vips: string[]) => void;
  retryMs?: number;
  /** Read-back intervals (see VerifySchedule); defaults there. */
  verifyIntervals?: { minIntervalMs?: number; costFactor?: number };
}

/** How long applying or verifying the data plane may keep failing before /healthz fails. */
export const DATA_PLANE_FAILURE_BOUND_MS = 20_000;

export class Reconciler {
  private readonly d: ReconcilerDeps;
  private readonly runner: CoalescingRunner;
  /** True once the kernel holds a full desired state (readiness). */
  applied = false;
  /** Carried between runs: with thousands of Services, a run rebuilds only what changed. */
  private readonly desiredCache: DesiredStateCache = new Map();
  /** The Services the last complete allocation ran on (all its writes done), and its problems. */
  private allocated: { services: V1Service[]; problems: SkippedItem[] } | undefined;
  /** The services last applied, for telling which VIPs are verified. */
  private desired: VirtualService[] = [];
  private verifiedNow: string[] = [];
  /** Since when applying, and verifying, the data plane has failed without a success since. */
  private readonly failingSince: { apply?: number; verify?: number } = {};
  private readonly schedule: VerifySchedule;
  /** A periodic read-back in progress (outside the runner), and its result for the next run. */
  private inspecting = false;
  private inspected: { mode: VerifyMode; inspection?: Inspection; error?: Error } | undefined;

  constructor(deps: ReconcilerDeps) {
    this.d = deps;
    this.schedule = new VerifySchedule({ trigger: () => void this.inspectDue(), ...deps.verifyIntervals });
    this.runner = new CoalescingRunner(
      () => this.run(),
      {
        onSuccess: (since) => this.d.metrics.reconcileSeconds.observe((performance.now() - since) / 1000),
        onError: (err) => {
          this.d.metrics.reconcileErrors.inc();
          this.d.log.error({ err }, "reconcile failed; the last good rules stay in place");
        },
      },
      deps.retryMs,
    );
  }

  /** Asks for a run; many calls before it starts make one run. */
  trigger(): void {
    this.runner.trigger();
  }

  stop(): void {
    this.schedule.stop();
    this.d.engine.unwatch();
    this.runner.stop();
  }

  /**
   * Starts reading the data plane back on the schedule, and on the engine's own news of foreign
   * changes (nft monitor); stopped by stop().
   */
  startVerifying(): void {
    this.schedule.start();
    this.d.engine.watch(() => this.suspectDrift());
  }

  /** Something saw the kernel change behind our back: a full read-back on the next run, now. */
  suspectDrift(): void {
    this.schedule.suspect();
  }

  /** VIPs whose every service and local route are verified in the kernel now, sorted. */
  verifiedVips(): string[] {
    return this.verifiedNow;
  }

  /** False once applying or verifying the data plane has kept failing for longer than the bound. */
  dataPlaneLive(now = performance.now()): boolean {
    const since = Math.min(this.failingSince.apply ?? now, this.failingSince.verify ?? now);
    return now - since < DATA_PLANE_FAILURE_BOUND_MS;
  }

  /**
   * A due read-back of the kernel, made beside the runner (listing a large table takes seconds and
   * writes nothing); what it saw is judged and repaired by the next run, in the single writer.
   */
  private async inspectDue(): Promise<void> {
    if (this.inspecting || this.inspected) return;
    const mode = this.schedule.take();
    if (mode === undefined) return;
    this.inspecting = true;
    try {
      this.inspected = { mode, inspection: await this.d.engine.inspect(mode) };
    } catch (err) {
      this.inspected = { mode, error: asError(err) };
    } finally {
      this.inspecting = false;
    }
    this.trigger();
  }

  /** One run of the single writer: the repair of a read-back made since the last run, then the reconcile. */
  private async run(): Promise<void> {
    const due = this.inspected;
    this.inspected = undefined;
    let failure: Error | undefined;
    if (due) {
      const { inspection, error } = due;
      // A full read beside the writer that did not finish (nft starts a listing over whenever a
      // change lands under it; with steady changes on a large table it may never end) is made
      // here instead, holding changes back for its length, once.
      const repair = inspection
        ? () => this.d.engine.repair(inspection)
        : due.mode === "full"
          ? () => this.d.engine.verify("full")
          : () => Promise.reject(asError(error));
      await this.verifyDataPlane(due.mode, repair, true).catch((err: unknown) => (failure = asError(err)));
    }
    await this.reconcileOnce();
    if (failure) throw failure;
  }

  /**
   * Repairs the data plane (`repair`: the engine's step; the local VIP routes too when `routes`)
   * and records what was found; throws when a repair failed.
   */
  private async verifyDataPlane(
    mode: VerifyMode,
    repair: () => Promise<VerifyReport>,
    routes: boolean,
  ): Promise<void> {
    const { engine, localVips, metrics, log } = this.d;
    const reports: VerifyReport[] = [];
    let failure: Error | undefined;
    for (const verify of [repair, ...(routes ? [() => localVips.verify()] : [])]) {
      try {
        reports.push(await verify());
      } catch (err) {
        failure ??= asError(err);
        if (err instanceof RepairError) reports.push(err.report);
      }
    }
    const [main] = reports;
    for (const r of reports) {
      metrics.verifySeconds.observe({ mode: r.full ? "full" : mode }, r.durationMs / 1000);
      for (const d of r.drift) metrics.driftFound.inc({ kind: d.kind });
      if (r.repaired > 0 && failure === undefined)
        for (const d of r.drift) metrics.driftRepaired.inc({ kind: d.kind });
      if (r.drift.length > 0)
        log.warn(
          {
            mode,
            drift: countByKind(r.drift),
            details: r.drift.slice(0, 10).map((d) => d.detail),
            repaired: r.repaired,
            rebuilt: r.rebuilt,
            ms: Math.round(r.durationMs),
          },
          failure === undefined ? "data plane drift repaired" : "data plane drift found; repair failed",
        );
    }
    if (main) this.schedule.done(main.full ? "full" : mode, main.durationMs, engine.fullReadMs());
    this.updateVerified();
    if (failure) {
      metrics.verifyErrors.inc();
      this.failingSince.verify ??= performance.now();
      throw failure;
    }
    delete this.failingSince.verify;
    metrics.lastVerification.setToCurrentTime();
  }

  private updateVerified(): void {
    const services = this.d.engine.verified();
    const routes = this.d.localVips.verified();
    const byVip = new Map<string, boolean>();
    for (const s of this.desired)
      byVip.set(s.vip, (byVip.get(s.vip) ?? true) && services.has(serviceKey(s)) && routes.has(s.vip));
    const vips = [...byVip]
      .filter(([, ok]) => ok)
      .map(([vip]) => vip)
      .sort();
    this.d.metrics.verifiedVips.set(vips.length);
    if (vips.join(",") === this.verifiedNow.join(",")) return;
    this.verifiedNow = vips;
    this.d.onVerifiedChange?.(vips);
  }

  async reconcileOnce(): Promise<void> {
    const { view, config } = this.d;
    if (!view.synced()) return;
    const ours = view.services().filter((s) => isOurs(s, config.loadBalancerClass));
    const problems: SkippedItem[] = [];
    if (this.d.isLeader() && this.d.writeStatus) {
      // Allocation depends on the Services alone: when none changed, it would write nothing new.
      if (!this.allocated || !sameItems(this.allocated.services, ours)) {
        const result = allocate(ours, config.vipPools);
        await this.writeAllocations(ours, result.allocations);
        this.allocated = { services: ours, problems: result.problems };
      }
      problems.push(...this.allocated.problems);
    }
    const desired = desiredState({
      services: ours,
      slices: view.slices(),
      loadBalancerClass: config.loadBalancerClass,
      scheduler: config.dataPlane.scheduler,
      cache: this.desiredCache,
      ...(this.d.health && { isUnhealthy: (t) => this.d.health!.isUnhealthy(t) }),
    });
    this.d.health?.setTargets(desired.healthTargets);
    problems.push(...desired.skipped);
    for (const p of problems) this.d.metrics.skipped.inc({ reason: p.reason });

    const vips = [...new Set(desired.services.map((s) => s.vip))];
    let changes: number;
    let routeChanges: number;
    try {
      const applied = await this.d.engine.apply(desired.services);
      changes = applied.changes;
      // That read was a full one: the next is due as if it had been scheduled.
      if (applied.readMs !== undefined) this.schedule.done("full", applied.readMs, applied.readMs);
      if (applied.drift.length > 0)
        this.d.log.warn(
          { drift: countByKind(applied.drift), details: applied.drift.slice(0, 10).map((d) => d.detail) },
          "replacing the kernel's rules: they are not as this controller makes them",
        );
      this.desired = desired.services;
      routeChanges = await this.d.localVips.apply(vips);
    } catch (err) {
      this.failingSince.apply ??= performance.now();
      throw err;
    }
    delete this.failingSince.apply;
    if (changes)
      this.d.log.info(
        { changes, services: desired.services.length, vips: vips.length },
        "data plane updated",
      );
    // What changed counts once read back from the kernel; a failed read-back is retried by the
    // runner, and until then those VIPs are not announced.
    let verifyFailure: Error | undefined;
    if (changes > 0 || routeChanges > 0 || this.verifiedNow.length < vips.length)
      await this.verifyDataPlane(
        "changed",
        () => this.d.engine.verify("changed"),
        routeChanges > 0 || this.verifiedNow.length < vips.length,
      ).catch((err: unknown) => (verifyFailure = asError(err)));
    else this.updateVerified();
    // Announced only once the rules are verified: a router never reaches a pod before it can serve.
    const verified = new Set(this.verifiedNow);
    const announced = announcedVips(desired.services).filter((vip) => verified.has(vip));
    await this.d.announce?.(announced);
    this.applied = true;
    this.d.metrics.announcedVips.set(this.d.announce ? announced.length : 0);
    this.d.metrics.ruleChanges.inc({ engine: this.d.engine.name }, changes);
    this.d.metrics.services.set(desired.services.length);
    this.d.metrics.backends.set(desired.services.reduce((n, s) => n + s.backends.length, 0));
    this.d.metrics.vips.set(vips.length);
    await this.d.report(problems);
    if (verifyFailure) throw verifyFailure;
  }

  private async writeAllocations(services: V1Service[], allocations: Allocation[]): Promise<void> {
    const byKey = new Map(services.map((s) => [`${s.metadata?.namespace}/${s.metadata?.name}`, s]));
    for (const { service, vips } of allocations) {
      const svc = byKey.get(service);
      const have = (svc?.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? "");
      if (!svc || have.join(",") === vips.join(",")) continue;
      await this.d.writeStatus!(svc, vips);
    }
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
