// The AWS cloud-routes loop of an LB pod. Each VIP has one owner among the live LB pods (rendezvous
// hashing over the member Leases), fenced by a Lease per VIP; the owner points VIP/32 at its
// instance's primary ENI in every configured route table. A graceful stop releases its Leases at
// once, so the next owner takes over without waiting; a crashed pod's Leases expire. Without the API
// server no pod may hold a Lease, so nobody writes and the routes stay as they are (fail static).
// Cloud calls happen only when what this pod must write changes, plus one read per resync.
import {
  Watch,
  type CoordinationV1Api,
  type KubeConfig,
  type ListWatch,
  type V1Lease,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { CoalescingRunner } from "../common/coalescingRunner.ts";
import type { SkippedItem } from "../controller/desiredState.ts";
import type { EventType } from "../controller/eventSink.ts";
import { ResilientInformers } from "../kube/informers.ts";
import { planAwsRoutes, planIsEmpty, type TableRoute } from "./awsRoutePlan.ts";
import type { AwsRouteTables } from "./awsRouteTables.ts";
import type { CloudRoutesMetrics } from "./cloudRoutesMetrics.ts";
import type { CloudCallError } from "./failureCause.ts";
import { FencedLeases } from "./fencedLease.ts";
import { providerId, type InstanceIdentity } from "./instanceIdentity.ts";
import { assignOwners } from "./ownerAssignment.ts";
import {
  DEFAULT_ROUTE_LEASE_TIMING,
  GROUP_LABEL,
  INSTANCE_ANNOTATION,
  NODE_ANNOTATION,
  ROLE_LABEL,
  TARGET_ANNOTATION,
  groupLabel,
  liveMembers,
  memberLeaseName,
  ourTargets,
  vipLeaseName,
  type LeaseTiming,
} from "./routeLeases.ts";

export const DEFAULT_RESYNC_MS = 60_000;

/** The Event reason of a failed cloud call, by cause. */
const FAILURE_REASON: Partial<Record<string, string>> = {
  permission: "CloudPermissionDenied",
  "not-found": "CloudResourceNotFound",
};

/** The Service a VIP belongs to, for Events. */
export interface ServiceRef {
  object: string;
  uid?: string | undefined;
}

export interface RouteVips {
  /** Every VIP a Service of this group has: routes to others are stale. */
  cluster: ReadonlySet<string>;
  /** The VIPs this pod's data plane serves (verified): only these are pointed at it. */
  served: ReadonlySet<string>;
  services: ReadonlyMap<string, ServiceRef>;
}

export interface AwsRouteLoopOptions {
  kubeconfig: KubeConfig;
  api: CoordinationV1Api;
  namespace: string;
  identity: string;
  loadBalancerClass: string;
  node: string;
  /** This pod's instance (instanceIdentity.ts). */
  self: Extract<InstanceIdentity, { cloud: "aws" }>;
  tables: AwsRouteTables;
  metrics: CloudRoutesMetrics;
  log: Logger;
  report: (items: SkippedItem[], type?: EventType) => Promise<void>;
  /** This LB pod, which problems without a Service are reported on. */
  pod: { object: string; kind: "Pod"; uid?: string | undefined };
  timing?: LeaseTiming;
  resyncMs?: number;
}

export class AwsRouteLoop {
  private readonly o: AwsRouteLoopOptions;
  private readonly timing: LeaseTiming;
  private readonly group: string;
  private readonly leases: FencedLeases;
  private readonly informers: ResilientInformers;
  private readonly leaseCache: ListWatch<V1Lease>;
  private readonly leaseRunner: CoalescingRunner;
  private readonly cloudRunner: CoalescingRunner;
  /** What the Leases say this pod writes now (renewLeases), which syncCloud makes true. */
  private want: { point: Set<string>; remove: Set<string>; ours: Set<string> } | undefined;
  private vips: RouteVips = { cluster: new Set(), served: new Set(), services: new Map() };
  private self: { instance: string; eni: string } | undefined;
  private routes: TableRoute[] = [];
  private local: { table: string; cidr: string }[] = [];
  /** The tables the last read could read: nothing is written to the others (reported instead). */
  private readable: string[] = [];
  private lastRead = 0;
  /** What the last successful apply made true; a different one needs a fresh read and plan. */
  private appliedKey = "";
  private pointed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(o: AwsRouteLoopOptions) {
    this.o = o;
    this.timing = o.timing ?? DEFAULT_ROUTE_LEASE_TIMING;
    this.group = groupLabel(o.loadBalancerClass);
    this.leases = new FencedLeases({
      api: o.api,
      namespace: o.namespace,
      identity: o.identity,
      durationS: this.timing.durationS,
    });
    this.informers = new ResilientInformers(o.log, {
      onChange: () => this.trigger(),
      onConnection: () => {},
    });
    this.leaseCache = this.informers.add<V1Lease>("leases", {
      path: `/apis/coordination.k8s.io/v1/namespaces/${o.namespace}/leases`,
      watch: new Watch(o.kubeconfig),
      list: (page) =>
        o.api.listNamespacedLease({
          namespace: o.namespace,
          labelSelector: `${GROUP_LABEL}=${this.group}`,
          ...page,
        }),
      labelSelector: `${GROUP_LABEL}=${this.group}`,
    });
    // Two loops, so that slow or throttled cloud calls never delay the Lease renewals (a pod whose
    // renewals starve loses its VIPs to the others, and would flap under load).
    this.leaseRunner = this.serialRunner(() => this.renewLeases(), "Lease renewal failed; retrying");
    this.cloudRunner = this.serialRunner(() => this.syncCloud(), "cloud route sync failed; retrying");
  }

  private serialRunner(job: () => Promise<void>, failed: string): CoalescingRunner {
    return new CoalescingRunner(
      () => {
        const run = job();
        this.inFlight.add(run);
        void run.catch(() => {}).finally(() => this.inFlight.delete(run));
        return run;
      },
      { onError: (err) => this.o.log.warn({ err }, failed) },
      this.timing.renewMs,
    );
  }

  /** The VIPs as the controller sees them now (after each reconcile). */
  setVips(vips: RouteVips): void {
    this.vips = vips;
    this.trigger();
  }

  trigger(): void {
    if (!this.stopped) this.leaseRunner.trigger();
  }

  /** Finds this instance's ENI, then runs until stop(). Throws when the instance cannot be found. */
  async start(): Promise<void> {
    const eni = await this.o.tables.primaryEni(this.o.self.instanceId);
    this.self = { instance: providerId(this.o.self), eni };
    await this.informers.start();
    this.tick();
  }

  private tick(): void {
    this.trigger();
    if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.timing.renewMs);
  }

  private memberName(): string {
    return memberLeaseName(this.group, this.o.node);
  }

  private labels(role: "member" | "vip") {
    return { [ROLE_LABEL]: role, [GROUP_LABEL]: this.group };
  }

  private async renewLeases(): Promise<void> {
    const self = this.self;
    if (!self || this.stopped) return;
    try {
      await this.leases.hold(this.memberName(), {
        labels: this.labels("member"),
        annotations: {
          [NODE_ANNOTATION]: this.o.node,
          [INSTANCE_ANNOTATION]: self.instance,
          [TARGET_ANNOTATION]: self.eni,
        },
      });
    } catch (err) {
      // Fail static: past the Lease's duration nothing is held, so nothing is written.
      this.o.metrics.failures.inc({ cause: "apiserver" });
      this.o.log.warn(
        { err },
        "cannot renew the member Lease; writing no routes until the API server is back",
      );
      return;
    }
    const all = [...this.leaseCache.list()];
    const now = Date.now();
    const members = liveMembers(all, now).map((m) => m.identity);
    if (!members.includes(this.o.identity)) members.push(this.o.identity); // the cache may lag our write
    const ours = ourTargets(all).add(self.eni);
    const stale = new Set(
      this.routes.filter((r) => ours.has(r.target) && !this.vips.cluster.has(r.vip)).map((r) => r.vip),
    );
    const owners = assignOwners([...new Set([...this.vips.served, ...stale])], members);
    const mine = new Set([...owners].filter(([, o]) => o === this.o.identity).map(([v]) => v));
    await this.holdVipLeases(mine);
    const held = [...mine].filter((v) => this.leases.holds(vipLeaseName(this.group, v)));
    const point = new Set(held.filter((v) => this.vips.served.has(v)));
    const remove = new Set(held.filter((v) => stale.has(v)));
    this.want = { point, remove, ours };
    this.o.metrics.ownedVips.set(point.size);
    this.cloudRunner.trigger();
  }

  private async syncCloud(): Promise<void> {
    const self = this.self;
    if (!self || !this.want || this.stopped) return;
    if (this.lastRead === 0) {
      await this.read();
      this.leaseRunner.trigger(); // stale routes may have come to light
    }
    const { point, remove, ours } = this.want;
    const now = Date.now();
    const key = JSON.stringify([[...point].sort(), [...remove].sort(), [...ours].sort()]);
    if (key === this.appliedKey && now - this.lastRead < (this.o.resyncMs ?? DEFAULT_RESYNC_MS)) return;
    await this.read();
    const plan = planAwsRoutes({
      tables: this.readable,
      routes: this.routes,
      point,
      remove,
      self: self.eni,
      ours,
      local: this.local,
    });
    this.o.metrics.foreignRoutes.set(plan.foreign.length);
    if (plan.foreign.length) await this.reportForeign(plan.foreign);
    if (plan.inside.length)
      await this.o.report(
        plan.inside.map((i) => ({
          ...this.subject(i.vip),
          reason: "VipInsideVpcRange",
          message: `VIP ${i.vip} lies inside route table ${i.table}'s local range ${i.cidr} (the VPC's own addresses), which AWS delivers in the VPC whatever route is added; pick a VIP pool outside the VPC's CIDRs`,
        })),
      );
    // Fencing: drop whatever Lease ran out while we read.
    const stillHeld = (vip: string) => this.leases.holds(vipLeaseName(this.group, vip));
    const fenced = {
      ...plan,
      create: plan.create.filter((c) => stillHeld(c.vip)),
      replace: plan.replace.filter((c) => stillHeld(c.vip)),
      remove: plan.remove.filter((c) => stillHeld(c.vip)),
    };
    const failures = planIsEmpty(fenced) ? [] : await this.o.tables.apply(fenced, self.eni);
    if (!planIsEmpty(fenced)) this.lastRead = 0; // what we wrote is read back at the next change
    await this.reportFailures(failures);
    if (failures.length === 0) {
      this.appliedKey = key;
      this.o.metrics.synced();
      await this.reportMoves(point, self);
    } else this.cloudRunner.later();
  }

  private async holdVipLeases(mine: ReadonlySet<string>): Promise<void> {
    const prefix = vipLeaseName(this.group, "");
    for (const name of this.leases.held())
      if (name.startsWith(prefix) && ![...mine].some((v) => vipLeaseName(this.group, v) === name))
        await this.leases
          .release(name)
          .catch((err: unknown) => this.o.log.warn({ err, lease: name }, "release failed"));
    await Promise.all(
      [...mine].map((vip) =>
        this.leases
          .hold(vipLeaseName(this.group, vip), { labels: this.labels("vip") })
          .catch((err: unknown) => {
            this.o.log.warn({ err, vip }, "cannot hold the VIP's Lease; not writing its routes");
            return false;
          }),
      ),
    );
  }

  private async read(): Promise<void> {
    const result = await this.o.tables.read();
    this.routes = result.routes;
    this.local = result.local;
    const failed = new Set(result.failed.map((f) => f.table));
    this.readable = this.o.tables.tableIds().filter((t) => !failed.has(t));
    this.lastRead = Date.now();
    await this.reportFailures(result.failed.map((f) => f.error));
  }

  private async reportFailures(failures: readonly CloudCallError[]): Promise<void> {
    for (const f of failures) this.o.metrics.failures.inc({ cause: f.reason ?? "unknown" });
    if (failures.length)
      await this.o.report(
        failures.map((f) => ({
          ...this.o.pod,
          reason: FAILURE_REASON[f.reason] ?? "CloudCallFailed",
          message: f.message,
        })),
      );
  }

  private async reportForeign(foreign: readonly TableRoute[]): Promise<void> {
    await this.o.report(
      foreign.map((r) => ({
        ...this.subject(r.vip),
        reason: "ForeignRoute",
        message: `route table ${r.table} already routes ${r.vip}/32 to ${r.target}, which is not an LB instance of this cluster; it is left alone, so this VIP is not routed to the load balancer there: remove that route or pick another VIP`,
      })),
    );
  }

  /** Where a VIP's problems are told: its Service, else this pod. */
  private subject(vip: string): Pick<SkippedItem, "object" | "kind" | "uid"> {
    const svc = this.vips.services.get(vip);
    return svc ? { ...svc, kind: "Service" } : this.o.pod;
  }

  /** A Normal Event on each Service whose VIP now points at this pod. */
  private async reportMoves(
    point: ReadonlySet<string>,
    self: { instance: string; eni: string },
  ): Promise<void> {
    const moved = [...point].filter((v) => !this.pointed.has(v));
    this.pointed = new Set(point);
    const items = moved.flatMap((vip) => {
      const svc = this.vips.services.get(vip);
      return svc
        ? [
            {
              ...svc,
              kind: "Service" as const,
              reason: "VipRouted",
              message: `VIP ${vip} now routed to LB pod ${this.o.identity} on node ${this.o.node} (${self.instance}, ${self.eni}) in ${this.o.tables.tableIds().join(", ")}`,
            },
          ]
        : [];
    });
    if (items.length) await this.o.report(items, "Normal");
  }

  /** Graceful stop: no more writes, then the Leases go back so the next owners take over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.leaseRunner.stop();
    this.cloudRunner.stop();
    await Promise.allSettled([...this.inFlight]);
    const held = this.leases.held();
    this.leases.dropAll();
    await Promise.all(
      held.map((name) =>
        this.leases
          .release(name)
          .catch((err: unknown) => this.o.log.warn({ err, lease: name }, "release failed")),
      ),
    );
    await this.informers.stop();
  }
}
