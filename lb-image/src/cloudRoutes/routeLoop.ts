// What the AWS and GCP cloud-routes loops share: the member Lease this pod holds for its node, the
// cache of the group's Leases, and two serial runners, one renewing Leases and one syncing the
// cloud, so that slow or throttled cloud calls never delay the renewals (a pod whose renewals
// starve loses its VIPs to the others, and would flap under load). Without the API server no pod
// may hold a Lease, so nobody writes and the routes stay as they are (fail static). The subclass
// decides what the Leases say it must write (renew) and makes it true in the cloud (sync).
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
import type { CloudRoutesMetrics } from "./cloudRoutesMetrics.ts";
import type { CloudCallError } from "./failureCause.ts";
import { FencedLeases } from "./fencedLease.ts";
import {
  DEFAULT_ROUTE_LEASE_TIMING,
  GROUP_LABEL,
  INSTANCE_ANNOTATION,
  NODE_ANNOTATION,
  ROLE_LABEL,
  TARGET_ANNOTATION,
  groupLabel,
  leaseStateKey,
  memberLeaseName,
  nextExpiry,
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

export interface RouteLoopOptions {
  kubeconfig: KubeConfig;
  api: CoordinationV1Api;
  namespace: string;
  identity: string;
  loadBalancerClass: string;
  node: string;
  metrics: CloudRoutesMetrics;
  log: Logger;
  report: (items: SkippedItem[], type?: EventType) => Promise<void>;
  /** This LB pod, which problems without a Service are reported on. */
  pod: { object: string; kind: "Pod"; uid?: string | undefined };
  timing?: LeaseTiming;
  resyncMs?: number;
}

/** This pod as a member: its instance (a providerID) and what routes to it point at. */
export interface MemberTarget {
  instance: string;
  target: string;
}

export abstract class RouteLoop<O extends RouteLoopOptions = RouteLoopOptions> {
  protected readonly o: O;
  protected readonly timing: LeaseTiming;
  protected readonly group: string;
  protected readonly leases: FencedLeases;
  protected readonly leaseCache: ListWatch<V1Lease>;
  protected readonly leaseRunner: CoalescingRunner;
  protected readonly cloudRunner: CoalescingRunner;
  protected vips: RouteVips = { cluster: new Set(), served: new Set(), services: new Map() };
  protected stopped = false;
  /** When the cloud was last read (0: read at the next sync). */
  protected lastRead = 0;
  /** What the last successful sync made true; a different one needs a fresh read and plan. */
  protected appliedKey = "";
  /** Since when the Lease watch has been up (undefined while it is down): see liveMembers. */
  protected watchedSince: number | undefined;
  private readonly informers: ResilientInformers;
  /** The Leases' holders and targets last seen (leaseStateKey): a change triggers a renewal. */
  private leaseKey = "";
  /** Looks at the Leases again when the next one runs out (a crashed holder's: no event tells). */
  private expiryTimer: NodeJS.Timeout | undefined;
  private pointed = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  /** Each runner's run in progress, if any (stop() waits for them). */
  private readonly inFlight = { lease: new Set<Promise<void>>(), cloud: new Set<Promise<void>>() };

  constructor(o: O) {
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
      onChange: () => this.leasesChanged(),
      onConnection: (up) => {
        this.watchedSince = up ? (this.watchedSince ?? Date.now()) : undefined;
      },
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
    this.leaseRunner = this.serialRunner(
      this.inFlight.lease,
      () => this.renewLeases(),
      "Lease renewal failed; retrying",
    );
    this.cloudRunner = this.serialRunner(
      this.inFlight.cloud,
      () => this.syncCloud(),
      "cloud route sync failed; retrying",
    );
  }

  /** Reads what the Leases say this pod must write now; triggers the cloud sync. */
  protected abstract renewLeases(): Promise<void>;
  /** Makes the cloud hold what renewLeases decided. */
  protected abstract syncCloud(): Promise<void>;

  private serialRunner(
    inFlight: Set<Promise<void>>,
    job: () => Promise<void>,
    failed: string,
  ): CoalescingRunner {
    return new CoalescingRunner(
      () => {
        const run = job();
        inFlight.add(run);
        void run.catch(() => {}).finally(() => inFlight.delete(run));
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

  /**
   * A freed, taken or expired Lease is acted on at once, so a crashed pod's VIPs move right when its
   * Leases run out; a mere renewal waits for the periodic one.
   */
  private leasesChanged(): void {
    if (this.stopped) return;
    const leases = this.leaseCache.list();
    const now = Date.now();
    clearTimeout(this.expiryTimer);
    const next = nextExpiry(leases, now);
    // Just past it: a Lease counts as expired once its end is behind.
    if (next !== undefined) this.expiryTimer = setTimeout(() => this.leasesChanged(), next - now + 5);
    const key = leaseStateKey(leases, now);
    if (key === this.leaseKey) return;
    this.leaseKey = key;
    this.trigger();
  }

  /** Starts the Lease cache and the renewals (every renewMs, and when a holder or target changes). */
  protected async run(): Promise<void> {
    await this.informers.start();
    this.tick();
  }

  private tick(): void {
    this.trigger();
    if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.timing.renewMs);
  }

  protected memberName(): string {
    return memberLeaseName(this.group, this.o.node);
  }

  protected labels(role: "member" | "vip" | "cleanup") {
    return { [ROLE_LABEL]: role, [GROUP_LABEL]: this.group };
  }

  /** Holds this node's member Lease; false (and nothing may be written) when the API server is lost. */
  protected async holdMember(self: MemberTarget): Promise<boolean> {
    try {
      return await this.leases.hold(this.memberName(), {
        labels: this.labels("member"),
        annotations: {
          [NODE_ANNOTATION]: this.o.node,
          [INSTANCE_ANNOTATION]: self.instance,
          [TARGET_ANNOTATION]: self.target,
        },
      });
    } catch (err) {
      // Fail static: past the Lease's duration nothing is held, so nothing is written.
      this.o.metrics.failures.inc({ cause: "apiserver" });
      this.o.log.warn(
        { err },
        "cannot renew the member Lease; writing no routes until the API server is back",
      );
      return false;
    }
  }

  /**
   * Holds the Leases `names` (this pod's share of those starting with `prefix`) and releases the
   * others with that prefix it held; returns the names it holds now.
   */
  protected async holdOwned(
    prefix: string,
    names: readonly string[],
    role: "vip" | "cleanup",
  ): Promise<string[]> {
    const wanted = new Set(names);
    for (const name of this.leases.held())
      if (name.startsWith(prefix) && !wanted.has(name))
        await this.leases
          .release(name)
          .catch((err: unknown) => this.o.log.warn({ err, lease: name }, "release failed"));
    await Promise.all(
      names.map((name) =>
        this.leases.hold(name, { labels: this.labels(role) }).catch((err: unknown) => {
          this.o.log.warn({ err, lease: name }, "cannot hold the Lease; not writing what it guards");
          return false;
        }),
      ),
    );
    return names.filter((n) => this.leases.holds(n));
  }

  /** Whether a sync with `key` has nothing to do: applied, and the resync not yet due. */
  protected upToDate(key: string): boolean {
    return key === this.appliedKey && Date.now() - this.lastRead < (this.o.resyncMs ?? DEFAULT_RESYNC_MS);
  }

  protected async reportFailures(failures: readonly CloudCallError[]): Promise<void> {
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

  /** A Warning on each VIP's Service (else this pod) for routes someone else made: left alone. */
  protected async reportForeign(foreign: readonly { vip: string; where: string; target: string }[]) {
    this.o.metrics.foreignRoutes.set(foreign.length);
    if (foreign.length)
      await this.o.report(
        foreign.map((r) => ({
          ...this.subject(r.vip),
          reason: "ForeignRoute",
          message: `${r.where} already routes ${r.vip}/32 to ${r.target}, which is not an LB instance of this cluster; it is left alone, so traffic for this VIP there may not reach the load balancer: remove that route or pick another VIP`,
        })),
      );
  }

  /** Where a VIP's problems are told: its Service, else this pod. */
  protected subject(vip: string): Pick<SkippedItem, "object" | "kind" | "uid"> {
    const svc = this.vips.services.get(vip);
    return svc ? { ...svc, kind: "Service" } : this.o.pod;
  }

  /** A Normal Event on each Service whose VIP is now routed to this pod (`where`: to what, in what). */
  protected async reportRouted(point: ReadonlySet<string>, where: string): Promise<void> {
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
              message: `VIP ${vip} now routed to LB pod ${this.o.identity} on node ${this.o.node} (${where})`,
            },
          ]
        : [];
    });
    if (items.length) await this.o.report(items, "Normal");
  }

  /** What a graceful stop does in the cloud once nothing else writes, before the Leases go back. */
  protected abstract beforeRelease(): Promise<void>;

  /** Graceful stop: no more syncs, the subclass's last word, then the Leases go back at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    clearTimeout(this.expiryTimer);
    this.leaseRunner.stop();
    this.cloudRunner.stop();
    // A renewal in flight writes nothing to the cloud: the last word need not wait for it, but the
    // release must (else it could take a Lease back after the release).
    await Promise.allSettled([...this.inFlight.cloud]);
    await this.beforeRelease().catch((err: unknown) =>
      this.o.log.warn({ err }, "cloud clean-up at stop failed; the others clean up after this pod"),
    );
    await Promise.allSettled([...this.inFlight.lease]);
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
