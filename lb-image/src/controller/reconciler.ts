// The control loop: whenever Services or EndpointSlices change, compute the desired state and
// apply it by diff. Bursts of changes coalesce into one run. A failed run leaves the last good
// rules in place and is retried; nothing is applied before the caches have synced, so a start
// without the API server never replaces adopted rules with an empty state.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
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
  /** The Services the last complete allocation ran on (all its writes done), and its problems. */
  private allocated: { services: V1Service[]; problems: SkippedItem[] } | undefined;

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
    await this.d.report(problems);
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
