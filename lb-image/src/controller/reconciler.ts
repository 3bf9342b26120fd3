// The control loop: whenever Services or EndpointSlices change, compute the desired state and
// apply it by diff. Bursts of changes coalesce into one run. A failed run leaves the last good
// rules in place and is retried; nothing is applied before the caches have synced, so a start
// without the API server never replaces adopted rules with an empty state.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import { desiredState, isOurs, type SkippedItem } from "./desiredState.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { allocate, type Allocation } from "./vipAllocator.ts";

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
  retryMs?: number;
}

export class Reconciler {
  private readonly d: ReconcilerDeps;
  private running = false;
  private again = false;
  private pendingSince: number | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** True once the kernel holds a full desired state (readiness). */
  applied = false;

  constructor(deps: ReconcilerDeps) {
    this.d = deps;
  }

  /** Asks for a run; many calls before it starts make one run. */
  trigger(): void {
    this.pendingSince ??= performance.now();
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.loop());
  }

  stop(): void {
    if (this.retry) clearTimeout(this.retry);
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      const since = this.pendingSince ?? performance.now();
      this.pendingSince = undefined;
      try {
        await this.reconcileOnce();
        this.d.metrics.reconcileSeconds.observe((performance.now() - since) / 1000);
      } catch (err) {
        this.d.metrics.reconcileErrors.inc();
        this.d.log.error({ err }, "reconcile failed; the last good rules stay in place");
        if (this.retry) clearTimeout(this.retry);
        this.retry = setTimeout(() => this.trigger(), this.d.retryMs ?? 1_000);
      }
    } while (this.again);
    this.running = false;
  }

  async reconcileOnce(): Promise<void> {
    const { view, config } = this.d;
    if (!view.synced()) return;
    const ours = view.services().filter((s) => isOurs(s, config.loadBalancerClass));
    const problems: SkippedItem[] = [];
    if (this.d.isLeader() && this.d.writeStatus) {
      const result = allocate(ours, config.vipPools);
      problems.push(...result.problems);
      await this.writeAllocations(ours, result.allocations);
    }
    const desired = desiredState({
      services: ours,
      slices: view.slices(),
      loadBalancerClass: config.loadBalancerClass,
      scheduler: config.dataPlane.scheduler,
    });
    problems.push(...desired.skipped);
    for (const p of problems) this.d.metrics.skipped.inc({ reason: p.reason });

    const { changes } = await this.d.engine.apply(desired.services);
    const vips = [...new Set(desired.services.map((s) => s.vip))];
    await this.d.localVips.apply(vips);
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
