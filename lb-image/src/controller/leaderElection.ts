// One elected allocator among the LB pods, over a coordination.k8s.io Lease in the controller's own
// namespace (client-go's algorithm): the holder renews; anyone may take over an expired lease;
// updates carry resourceVersion, so two pods can never both win.
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";

export interface LeaseTiming {
  /** A lease not renewed for this long is free to take. */
  leaseDurationS: number;
  /** How often the holder renews and others retry. */
  retryPeriodMs: number;
}

/**
 * Lease times are MicroTime: the API server insists on six fractional digits, while the client
 * serializes dates with toISOString() (three). A Date whose ISO form carries the extra zeros fixes it.
 */
export class MicroTime extends Date {
  override toISOString(): string {
    return super.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
  }
}

export const DEFAULT_LEASE_TIMING: LeaseTiming = { leaseDurationS: 15, retryPeriodMs: 2_000 };

export type LeaseDecision = "acquire" | "renew" | "follow";

/** What to do with the lease as read (undefined: it does not exist yet). */
export function decide(lease: V1Lease | undefined, me: string, now: Date): LeaseDecision {
  const spec = lease?.spec;
  if (!spec?.holderIdentity) return "acquire";
  if (spec.holderIdentity === me) return "renew";
  const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
  const expired = renewed + (spec.leaseDurationSeconds ?? 0) * 1000 < now.getTime();
  return expired ? "acquire" : "follow";
}

/** The spec a holder writes when it acquires or renews `lease` (undefined: not created yet). */
export function heldLeaseSpec(
  lease: V1Lease | undefined,
  decision: Exclude<LeaseDecision, "follow">,
  identity: string,
  durationS: number,
  now: MicroTime,
) {
  return {
    holderIdentity: identity,
    leaseDurationSeconds: durationS,
    renewTime: now,
    acquireTime:
      decision === "renew" && lease?.spec?.acquireTime ? new MicroTime(lease.spec.acquireTime) : now,
    leaseTransitions: (lease?.spec?.leaseTransitions ?? 0) + (decision === "acquire" && lease ? 1 : 0),
  };
}

export interface ElectorOptions {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  timing?: LeaseTiming;
  onChange: (leading: boolean) => void;
  onError?: (err: unknown) => void;
}

/** Runs the election loop until stop(); calls onChange whenever leadership flips. */
export class LeaderElector {
  private readonly opts: ElectorOptions;
  private readonly timing: LeaseTiming;
  private leading = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(opts: ElectorOptions) {
    this.opts = opts;
    this.timing = opts.timing ?? DEFAULT_LEASE_TIMING;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  /** Stops the loop; a leader hands the lease back so another pod takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (!this.leading) return;
    try {
      const lease = await this.opts.api.readNamespacedLease({
        name: this.opts.name,
        namespace: this.opts.namespace,
      });
      if (lease.spec?.holderIdentity === this.opts.identity) {
        lease.spec.holderIdentity = undefined;
        await this.opts.api.replaceNamespacedLease({
          name: this.opts.name,
          namespace: this.opts.namespace,
          body: lease,
        });
      }
    } catch (err) {
      this.opts.onError?.(err);
    }
    this.set(false);
  }

  private set(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.opts.onChange(leading);
  }

  private async tick(): Promise<void> {
    try {
      this.set(await this.tryAcquireOrRenew());
    } catch (err) {
      // Cannot reach the API: a leader that cannot renew must assume it lost the lease.
      this.set(false);
      this.opts.onError?.(err);
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.timing.retryPeriodMs);
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { api, namespace, name, identity } = this.opts;
    let lease: V1Lease | undefined;
    try {
      lease = await api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
    }
    const now = new MicroTime();
    const decision = decide(lease, identity, now);
    if (decision === "follow") return false;
    const spec = heldLeaseSpec(lease, decision, identity, this.timing.leaseDurationS, now);
    try {
      if (!lease)
        await api.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec } });
      else await api.replaceNamespacedLease({ name, namespace, body: { metadata: lease.metadata!, spec } });
      return true;
    } catch (err) {
      // 409: another pod changed the lease between our read and write; it won this round.
      if ((err as { code?: number }).code === 409) return false;
      throw err;
    }
  }
}

/**
 * One elected VIP allocator per LB group: groups with different load-balancer classes (each its own
 * pools, as the paper's two services with three and two LBs) must not wait on each other's leader.
 * A class is a qualified name ("portable-lb.io/ecmp"); a Lease name is a DNS subdomain.
 */
export function allocatorLease(loadBalancerClass: string): string {
  const name = `portable-lb-allocator-${loadBalancerClass.toLowerCase().replace(/[^a-z0-9.-]/g, "-")}`;
  return name.slice(0, 253).replace(/[^a-z0-9]+$/, "");
}
