// The control loop: whenever Services or EndpointSlices change, compute the desired state and
// apply it by diff. Bursts of changes coalesce into one run. A failed run leaves the last good
// rules in place and is retried; nothing is applied before the caches have synced, so a start
// without the API server never replaces adopted rules with an empty state.
//
// The same runner (the one writer to the kernel) reads the data plane back: after each change, and
// on the VerifySchedule's ticks, repairing any drift toward the last applied state (also while the
// API server is away). Only VIPs whose every service and local route were read back as applied are
// verified, and only those are announced.
import type { V1EndpointSlice, V1NetworkPolicy, V1Service } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import { RepairError, countByKind, type VerifyMode, type VerifyReport } from "../dataplane/drift.ts";
import type { DataPlaneEngine, Inspection } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import { serviceKey, type VirtualService } from "../dataplane/model.ts";
import { staleUdpFlows, type StaleUdpFlow } from "../dataplane/staleUdpFlows.ts";
import { routesDue, type RouteWatch } from "../dataplane/routeWatch.ts";
import { VerifySchedule } from "../dataplane/verifySchedule.ts";
import { classlessHints } from "./classlessHints.ts";
import { finalizerWork, isServed, releasedNote } from "./cleanupFinalizer.ts";
import { unsupportedFields } from "./unsupportedFields.ts";
import {
  DSR_FALLBACK_REASONS,
  desiredState,
  refOf,
  statusVips,
  type DesiredStateCache,
  type SkippedItem,
} from "./desiredState.ts";
import type { LbPeers } from "./dsrPolicy.ts";
import type { EventType, ReportOptions } from "./eventSink.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { ingressAsWritten, ingressOf } from "./statusWriter.ts";
import { allocate, type Allocation } from "./vipAllocator.ts";
import { acceptFromProblems } from "./handover.ts";
import {
  NO_INTENT,
  announceChanges,
  announceIntent,
  sameHeldBack,
  type AnnounceIntent,
} from "../announce/announceAnnotation.ts";
import { HELD_BACK_REASONS, announcement } from "../bgp/announcements.ts";
import { CoalescingRunner } from "../common/coalescingRunner.ts";
import { sameItems } from "../common/sameItems.ts";
import type { HealthChecker } from "../health/healthChecker.ts";

export interface ClusterView {
  synced(): boolean;
  services(): V1Service[];
  slices(): V1EndpointSlice[];
  /** Every namespace's NetworkPolicies, where they are watched (direct server return). */
  networkPolicies?(): V1NetworkPolicy[] | undefined;
  /** Nodes that cannot decapsulate IPIP, where that is watched (the IPVS engine's DSR). */
  nodesWithoutIpip?(): ReadonlySet<string> | undefined;
}

export interface ReconcilerDeps {
  config: LbConfig;
  view: ClusterView;
  engine: DataPlaneEngine;
  localVips: LocalVips;
  /**
   * `ip monitor` of the pod's namespace: the local VIP routes (and the engine's DSR tunnels) are
   * read back when it tells of a change, and only as a safety net while it listens. Without it,
   * on every scheduled check.
   */
  routes?: RouteWatch;
  metrics: ControllerMetrics;
  log: Logger;
  /** Sends Events (Warnings unless told otherwise); never throws. */
  report: (items: SkippedItem[], type?: EventType, opts?: ReportOptions) => Promise<void>;
  /** The LB pods, whom NetworkPolicies must let send the DSR tunnel (dsrPolicy.ts). */
  lbPeers?: LbPeers;
  /** This LB pod, which data-plane drift is reported on. */
  pod?: Pick<SkippedItem, "object" | "kind" | "uid">;
  /** Writes allocations into Service status; only the elected allocator has one. */
  writeStatus?: (svc: V1Service, vips: string[]) => Promise<void>;
  /**
   * Adds (true) or removes the cleanup finalizer (cleanupFinalizer.ts); only the elected allocator
   * has one. Without, Services get none.
   */
  writeFinalizer?: (svc: V1Service, present: boolean) => Promise<void>;
  isLeader: () => boolean;
  /** Active health checks; the reconciler tells it what to check and reads its verdicts. */
  health?: HealthChecker;
  /**
   * BGP mode: hands the Announcer the VIPs the data plane serves now, verified in the kernel, less
   * those their Services hold back (see bgp/announcements.ts), after every run that applied or read
   * back the data plane, and at once when the Services hold back others; it announces those the
   * rest of the path can deliver too. Cloud-routes mode: the route loop, which also removes its
   * routes to the held-back VIPs (`heldBack`).
   */
  announce?: (vips: string[], heldBack: ReadonlySet<string>) => void;
  /**
   * Deletes the conntrack entries of UDP flows whose backend has left (dataplane/staleUdpFlows.ts),
   * after the rules no longer send new ones there. Without, they stay until conntrack times out.
   */
  flushStaleUdp?: (flows: StaleUdpFlow[]) => Promise<unknown>;
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
  /** The Services the last allocation ran on, its result, and whether all its writes landed. */
  private allocated:
    | { services: V1Service[]; allocations: Allocation[]; problems: SkippedItem[]; written: boolean }
    | undefined;
  /**
   * Status writes that landed but that the watch cache may not show yet, by Service: the written
   * Service, and the resourceVersion it was written over. While the cache still holds that version,
   * allocation reads the written one: else a Service created meanwhile could be handed an address
   * that has just been written to another.
   */
  private readonly ownWrites = new Map<string, { over: string | undefined; svc: V1Service }>();
  /** The services last applied, for telling which VIPs are verified. */
  private desired: VirtualService[] = [];
  private verifiedNow: string[] = [];
  /** What the Services last asked of the announcements (their portable-lb.io/announce). */
  private intent: AnnounceIntent = NO_INTENT;
  /** Since when applying, and verifying, the data plane has failed without a success since. */
  private readonly failingSince: { apply?: number; verify?: number } = {};
  private readonly schedule: VerifySchedule;
  /** A periodic read-back in progress (outside the runner), and its result for the next run. */
  private inspecting = false;
  private inspected: { mode: VerifyMode; inspection?: Inspection; error?: Error } | undefined;
  /** When the local VIP routes were last read back, finding them as applied or repaired (performance.now()). */
  private routesReadAt = -Infinity;

  constructor(deps: ReconcilerDeps) {
    this.d = deps;
    this.schedule = new VerifySchedule({
      trigger: () => void this.inspectDue(),
      fullReads: () => deps.engine.fullReadAffordable(),
      ...deps.verifyIntervals,
    });
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
    this.d.routes?.stop();
    this.runner.stop();
  }

  /**
   * Starts reading the data plane back on the schedule, on the engine's own news of foreign
   * changes (nft monitor: a full read), and on news of route changes (ip monitor: a cheap check,
   * which reads the routes back); stopped by stop().
   */
  startVerifying(): void {
    this.schedule.start();
    this.d.routes?.start(() => this.schedule.soon());
    this.d.engine.watch(() => this.suspectDrift(), this.d.routes);
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
      const routes = routesDue(this.d.routes, this.routesReadAt, 0);
      await this.verifyDataPlane(due.mode, repair, routes).catch((err: unknown) => (failure = asError(err)));
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
    const readRoutes = async () => {
      this.routesReadAt = performance.now();
      try {
        return await localVips.verify();
      } catch (err) {
        this.routesReadAt = -Infinity; // read again at the next check, watched or not
        throw err;
      }
    };
    for (const verify of [repair, ...(routes ? [readRoutes] : [])]) {
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
    const drifted = [...new Set(reports.flatMap((r) => r.drift.map((d) => d.kind)))].sort();
    // Told on the LB pod too (once per ten minutes per distinct cause): something else edits its rules.
    if (drifted.length > 0 && this.d.pod)
      void this.d.report([
        {
          ...this.d.pod,
          reason: failure === undefined ? "DataPlaneDriftRepaired" : "DataPlaneRepairFailed",
          message:
            failure === undefined
              ? `the kernel's rules in this pod differed from what the controller applied (${drifted.join(", ")}) and were repaired; something else changes this pod's network namespace (see the controller's log for the details)`
              : `the kernel's rules in this pod differ from what the controller applied (${drifted.join(", ")}) and repairing them failed (${failure.message}); their VIPs are not announced, and the controller is restarted if this lasts ${DATA_PLANE_FAILURE_BOUND_MS / 1000} s`,
        },
      ]);
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
    this.verifiedNow = vips;
    // Announced only once the rules are verified: a router never reaches a pod before it can serve.
    const verified = new Set(vips);
    const disabled = new Set(this.intent.heldBack.keys());
    // Nor a VIP whose Service is gone or being deleted: the intent is the Services' now, the rules
    // may be the last run's. Else a held-back VIP whose Service was deleted would be announced until
    // the next run removed its rules (a migration's source, announced again as its app went).
    const owned = this.intent.owners;
    const a = announcement(
      this.desired.filter((s) => owned.has(s.vip)),
      disabled,
    );
    for (const reason of HELD_BACK_REASONS)
      this.d.metrics.vipsHeldBack.set({ reason }, a.heldBack[reason].length);
    this.d.announce?.(
      a.vips.filter((vip) => verified.has(vip)),
      disabled,
    );
  }

  /**
   * Takes what the Services now ask of the announcements: a change is handed on at once (holding a
   * VIP back is always safe, and one released was verified before), whatever the data plane's run
   * does next, and told on the Services.
   */
  private takeIntent(intent: AnnounceIntent): void {
    const before = this.intent;
    this.intent = intent;
    if (sameHeldBack(before, intent)) return;
    if (this.applied) this.updateVerified();
    if (!this.d.announce) return; // nothing announces or routes: nothing to tell
    const pod = this.d.pod?.object.split("/")[1] ?? "(unnamed)";
    const told = announceChanges(before, intent, pod, this.d.config.routingMode);
    // Each change is news, even one back to a state told minutes ago.
    if (told.length) void this.d.report(told, "Normal", { repeat: true });
  }

  async reconcileOnce(): Promise<void> {
    const { view, config } = this.d;
    if (!view.synced()) return;
    // A Service being deleted is released at once; its finalizer holds the object until it is.
    const ours = view.services().filter((s) => isServed(s, config));
    const intent = announceIntent(ours);
    this.takeIntent(intent);
    const problems: SkippedItem[] = [...intent.problems];
    const allocating = this.d.isLeader() && this.d.writeStatus !== undefined;
    if (allocating) {
      // Allocation depends on the Services alone: when none changed since a run whose writes all
      // landed, it would write nothing new.
      const current = this.withOwnWrites(ours);
      if (!this.allocated?.written || !sameItems(this.allocated.services, current)) {
        const result = allocate(current, config.vipPools);
        this.allocated = { services: current, ...result, written: false };
      }
      problems.push(...this.allocated.problems);
      problems.push(...acceptFromProblems(ours, refOf), ...unsupportedFields(ours));
    }
    const desired = desiredState({
      services: ours,
      slices: view.slices(),
      loadBalancerClass: config.loadBalancerClass,
      serveClassless: config.serveClassless,
      scheduler: config.dataPlane.scheduler,
      forwarding: config.dataPlane.mode,
      relaysHandover: this.d.engine.name === "nftables",
      hashesOnClient: this.d.engine.name === "nftables" || config.dataPlane.scheduler === "mh",
      ...dsrInputsOf(view, this.d.lbPeers),
      cache: this.desiredCache,
      ...(this.d.health && { isUnhealthy: (t) => this.d.health!.isUnhealthy(t) }),
    });
    this.d.health?.setTargets(desired.healthTargets);
    problems.push(...desired.skipped);
    for (const p of problems) this.d.metrics.skipped.inc({ reason: p.reason });
    for (const reason of DSR_FALLBACK_REASONS)
      this.d.metrics.dsrFallbackPorts.set(
        { reason },
        desired.skipped.filter((p) => p.reason === reason).length,
      );

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
      const stale = staleUdpFlows(this.desired, desired.services);
      this.desired = desired.services;
      if (stale.length) void this.flushStale(stale);
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
    this.applied = true;
    this.d.metrics.ruleChanges.inc({ engine: this.d.engine.name }, changes);
    this.d.metrics.services.set(desired.services.length);
    this.d.metrics.backends.set(desired.services.reduce((n, s) => n + s.backends.length, 0));
    this.d.metrics.vips.set(vips.length);
    // Status writes come after the data plane (which serves what the statuses already say), so a
    // slow or failing API server never holds it back; what did not land is retried.
    const allocated = this.allocated;
    const notes: SkippedItem[] = [];
    const finalizers =
      allocating && this.d.writeFinalizer ? finalizerWork(view.services(), config) : undefined;
    // The data plane has let go of the released Services by now. Until the watch shows them gone,
    // their addresses still count as held: no other Service's status is given one before.
    if (finalizers && !(await this.releaseAll(finalizers.release, notes))) this.runner.later();
    if (allocating && allocated && !allocated.written) {
      allocated.written = await this.writeAllocations(
        allocated.services,
        allocated.allocations,
        notes,
        finalizers?.release ?? [],
      );
      if (!allocated.written) this.runner.later();
    }
    // After the status writes, which compare resourceVersions that a finalizer's patch would bump.
    if (finalizers && !(await this.claimAll(finalizers.claim))) this.runner.later();
    // Every problem here comes from the cluster's objects, which every LB pod reads alike: one pod,
    // the allocator, tells it (else each Warning came once per LB pod). Each pod still counts them.
    if (allocating) await this.d.report(problems);
    // Where portable-lb serves classless Services too, none is left waiting for another LB.
    if (allocating && !config.serveClassless)
      notes.push(...classlessHints(view.services(), config.loadBalancerClass));
    if (notes.length) await this.d.report(notes, "Normal");
    if (verifyFailure) throw verifyFailure;
  }

  /** Best effort, beside the run: a failure leaves the entries to conntrack's timeout, and says so. */
  private async flushStale(flows: StaleUdpFlow[]): Promise<void> {
    if (!this.d.flushStaleUdp) return;
    try {
      await this.d.flushStaleUdp(flows);
      this.d.metrics.staleUdpFlowsFlushed.inc({ result: "ok" }, flows.length);
    } catch (err) {
      this.d.metrics.staleUdpFlowsFlushed.inc({ result: "error" }, flows.length);
      this.d.log.warn(
        { err, flows: flows.slice(0, 10) },
        "could not delete the conntrack entries of UDP flows to backends that left; clients sending from a fixed port reach them until the entries time out",
      );
    }
  }

  /** One write of a finalizer's step: true when it landed; else logged, counted, and false. */
  private async finalizerStep(svc: V1Service, what: string, write: () => Promise<void>): Promise<boolean> {
    try {
      await write();
      return true;
    } catch (err) {
      this.d.metrics.statusWriteErrors.inc();
      this.d.log.error({ err, service: refOf(svc).object }, `could not ${what}; retrying`);
      return false;
    }
  }

  /** Puts the cleanup finalizer on the Services served without one; true when all landed. */
  private async claimAll(claim: V1Service[]): Promise<boolean> {
    let landed = true;
    for (const svc of claim) {
      const done = await this.finalizerStep(svc, "add the cleanup finalizer", () =>
        this.d.writeFinalizer!(svc, true),
      );
      landed &&= done;
    }
    return landed;
  }

  /**
   * Releases the Services no longer served that hold the finalizer: the status cleared (unless being
   * deleted), then the finalizer removed, and told. True when all landed.
   */
  private async releaseAll(release: V1Service[], notes: SkippedItem[]): Promise<boolean> {
    let landed = true;
    for (const svc of release) {
      const vips = statusVips(svc);
      const writeStatus = this.d.writeStatus!;
      const clear = !svc.metadata?.deletionTimestamp && vips.length > 0 && ingressAsWritten(svc, vips);
      const done =
        (!clear ||
          (await this.finalizerStep(svc, "clear the released Service's status", () =>
            writeStatus(svc, []),
          ))) &&
        (await this.finalizerStep(svc, "remove the cleanup finalizer", () =>
          this.d.writeFinalizer!(svc, false),
        ));
      if (done) notes.push(releasedNote(svc));
      landed &&= done;
    }
    return landed;
  }

  /** The cached Services, with own writes the cache does not show yet in place of the old versions. */
  private withOwnWrites(services: V1Service[]): V1Service[] {
    if (this.ownWrites.size === 0) return services;
    const pending = new Map(this.ownWrites);
    this.ownWrites.clear();
    return services.map((svc) => {
      const key = refOf(svc).object;
      const own = pending.get(key);
      // Any other version (or a new Service of that name) came after the write and shows it.
      if (!own || own.over !== svc.metadata?.resourceVersion || own.svc.metadata?.uid !== svc.metadata?.uid)
        return svc;
      this.ownWrites.set(key, own);
      return own.svc;
    });
  }

  /**
   * Writes the allocations that differ from the status; true when all landed. Several Services'
   * statuses must never hold one address, even for a moment, nor when a write fails: an address
   * moving from one Service to another is written to the new one only after the write that takes
   * it from the old one has landed (else in a later run). Failed writes are logged and counted.
   */
  private async writeAllocations(
    services: V1Service[],
    allocations: Allocation[],
    notes: SkippedItem[],
    releasing: V1Service[],
  ): Promise<boolean> {
    const byKey = new Map(services.map((s) => [refOf(s).object, s]));
    // Who has each address in status, as far as this run knows: the cache, then its own writes.
    const holders = new Map<string, Set<string>>();
    const hold = (ip: string, service: string, yes: boolean) => {
      const set = holders.get(ip) ?? new Set();
      holders.set(ip, set);
      if (yes) set.add(service);
      else set.delete(service);
    };
    for (const svc of [...services, ...releasing])
      for (const ip of statusVips(svc)) hold(ip, refOf(svc).object, true);
    let todo = allocations.filter((a) => a.change && byKey.has(a.service));
    let failed = 0;
    for (let progress = true; todo.length && progress;) {
      progress = false;
      const next: Allocation[] = [];
      for (const a of todo) {
        if (a.vips.some((ip) => [...(holders.get(ip) ?? [])].some((s) => s !== a.service))) {
          next.push(a);
          continue;
        }
        const svc = byKey.get(a.service)!;
        try {
          await this.d.writeStatus!(svc, a.vips);
        } catch (err) {
          failed++;
          this.d.metrics.statusWriteErrors.inc();
          this.d.log.error(
            { err, service: a.service, vips: a.vips },
            "could not write the VIP allocation into the Service's status; retrying",
          );
          continue;
        }
        progress = true;
        this.ownWrites.set(a.service, {
          over: svc.metadata?.resourceVersion,
          svc: { ...svc, status: { loadBalancer: { ingress: ingressOf(a.vips) } } },
        });
        for (const ip of statusVips(svc)) hold(ip, a.service, false);
        for (const ip of a.vips) hold(ip, a.service, true);
        notes.push({ ...refOf(svc), kind: "Service", ...a.change! });
      }
      todo = next;
    }
    return failed === 0 && todo.length === 0;
  }
}

/** desiredState's NetworkPolicy input, where they are watched. */
function dsrInputsOf(view: ClusterView, lb: LbPeers | undefined) {
  const policies = view.networkPolicies?.();
  const withoutIpip = view.nodesWithoutIpip?.();
  return {
    ...(policies && lb && { networkPolicies: { policies, lb } }),
    ...(withoutIpip && { nodesWithoutIpip: withoutIpip }),
  };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
