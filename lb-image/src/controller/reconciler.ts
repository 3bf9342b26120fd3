// The control loop: whenever Services or EndpointSlices change, compute the desired state and
// apply it by diff. Bursts of changes coalesce into one run. A failed run leaves the last good
// rules in place and is retried; nothing is applied before the caches have synced, so a start
// without the API server never replaces adopted rules with an empty state.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import { classlessHints } from "./classlessHints.ts";
import {
  desiredState,
  isOurs,
  refOf,
  statusVips,
  type DesiredStateCache,
  type SkippedItem,
} from "./desiredState.ts";
import type { EventType } from "./eventSink.ts";
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
  /** Sends Events (Warnings unless told otherwise); never throws. */
  report: (items: SkippedItem[], type?: EventType) => Promise<void>;
  /** Writes allocations into Service status; only the elected allocator has one. */
  writeStatus?: (svc: V1Service, vips: string[]) => Promise<void>;
  isLeader: () => boolean;
  /** Active health checks; the reconciler tells it what to check and reads its verdicts. */
  health?: HealthChecker;
  /**
   * BGP mode: hands the VIPs the data plane can serve now (see bgp/announcements.ts) to the
   * Announcer, which announces those the rest of the path can deliver too.
   */
  announce?: (vips: string[]) => void;
  retryMs?: number;
}

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

  constructor(deps: ReconcilerDeps) {
    this.d = deps;
    this.runner = new CoalescingRunner(
      () => this.reconcileOnce(),
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
    this.runner.stop();
  }

  async reconcileOnce(): Promise<void> {
    const { view, config } = this.d;
    if (!view.synced()) return;
    const ours = view.services().filter((s) => isOurs(s, config.loadBalancerClass));
    const problems: SkippedItem[] = [];
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

    const { changes } = await this.d.engine.apply(desired.services);
    const vips = [...new Set(desired.services.map((s) => s.vip))];
    await this.d.localVips.apply(vips);
    // Candidates only once the rules are in: a router never reaches a pod before it can serve.
    this.d.announce?.(announcedVips(desired.services));
    this.applied = true;
    this.d.metrics.ruleChanges.inc({ engine: this.d.engine.name }, changes);
    this.d.metrics.services.set(desired.services.length);
    this.d.metrics.backends.set(desired.services.reduce((n, s) => n + s.backends.length, 0));
    this.d.metrics.vips.set(vips.length);
    if (changes)
      this.d.log.info(
        { changes, services: desired.services.length, vips: vips.length },
        "data plane updated",
      );
    // Status writes come after the data plane (which serves what the statuses already say), so a
    // slow or failing API server never holds it back; what did not land is retried.
    const allocated = this.allocated;
    const notes: SkippedItem[] = [];
    if (allocating && allocated && !allocated.written) {
      allocated.written = await this.writeAllocations(allocated.services, allocated.allocations, notes);
      if (!allocated.written) this.runner.later();
    }
    await this.d.report(problems);
    if (allocating) notes.push(...classlessHints(view.services(), config.loadBalancerClass));
    if (notes.length) await this.d.report(notes, "Normal");
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
    for (const svc of services) for (const ip of statusVips(svc)) hold(ip, refOf(svc).object, true);
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
          svc: { ...svc, status: { loadBalancer: { ingress: a.vips.map((ip) => ({ ip })) } } },
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
