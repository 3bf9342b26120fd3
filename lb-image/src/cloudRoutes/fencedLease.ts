// Holding Leases with fencing: a pod may act on what a Lease guards only while its last successful
// acquire or renew is younger than the Lease's duration less a margin for clock skew. Others can
// take the Lease only once that duration has passed since the renewTime written, which is the
// moment the request started, so a pod that lost a Lease (or cannot reach the API server) has
// stopped writing before anyone else may start.
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";
import { MicroTime, decide, heldLeaseSpec } from "../controller/leaderElection.ts";

/** Of the duration, the part kept back for clock skew between the pods and the API server. */
const SKEW_MARGIN = 0.2;

/**
 * Gives up waiting on an API call after `ms`: the generated client sets no timeout, and one request
 * hung on an overloaded API server would stall the renewals of every Lease. A late answer is
 * ignored (fencing counts from the request's start, so it never extends what this pod may do).
 */
function bounded<T>(call: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Lease call got no answer in ${ms} ms`)), ms);
  });
  return Promise.race([call, timeout]).finally(() => clearTimeout(timer));
}

export interface FencedLeasesOptions {
  api: CoordinationV1Api;
  namespace: string;
  identity: string;
  durationS: number;
}

export class FencedLeases {
  private readonly o: FencedLeasesOptions;
  /** Lease name -> until when (local clock) this pod may act on it. */
  private readonly validUntil = new Map<string, number>();

  constructor(o: FencedLeasesOptions) {
    this.o = o;
  }

  /** No API call may take longer than the part of a Lease's duration a holder may act on. */
  private callMs(): number {
    return this.o.durationS * 1000 * (1 - SKEW_MARGIN);
  }

  /** True while this pod holds the Lease and may act on it. */
  holds(name: string): boolean {
    return (this.validUntil.get(name) ?? 0) > Date.now();
  }

  held(): string[] {
    return [...this.validUntil.keys()].filter((n) => this.holds(n));
  }

  /**
   * Acquires a free or expired Lease, or renews it; false when another holds it. Labels and
   * annotations are written with it. Throws when the API server cannot be reached.
   */
  async hold(
    name: string,
    meta: { labels: Record<string, string>; annotations?: Record<string, string> },
  ): Promise<boolean> {
    const { api, namespace, identity, durationS } = this.o;
    const started = Date.now();
    let lease: V1Lease | undefined;
    try {
      lease = await bounded(api.readNamespacedLease({ name, namespace }), this.callMs());
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
    }
    const now = new MicroTime(started);
    const decision = decide(lease, identity, now);
    if (decision === "follow") {
      this.validUntil.delete(name);
      return false;
    }
    const spec = heldLeaseSpec(lease, decision, identity, durationS, now);
    const metadata = { ...(lease?.metadata ?? { name, namespace }), ...meta };
    try {
      if (!lease)
        await bounded(api.createNamespacedLease({ namespace, body: { metadata, spec } }), this.callMs());
      else
        await bounded(
          api.replaceNamespacedLease({ name, namespace, body: { metadata, spec } }),
          this.callMs(),
        );
    } catch (err) {
      // 409: another pod wrote it between our read and write; it won this round.
      if ((err as { code?: number }).code === 409) {
        this.validUntil.delete(name);
        return false;
      }
      throw err;
    }
    this.validUntil.set(name, started + durationS * 1000 * (1 - SKEW_MARGIN));
    return true;
  }

  /**
   * Gives the Lease up so another pod may take it at once. This pod stops acting on it before the
   * request is sent, whether or not the request succeeds.
   */
  async release(name: string): Promise<void> {
    const { api, namespace, identity } = this.o;
    this.validUntil.delete(name);
    let lease: V1Lease;
    try {
      lease = await bounded(api.readNamespacedLease({ name, namespace }), this.callMs());
    } catch (err) {
      if ((err as { code?: number }).code === 404) return;
      throw err;
    }
    if (lease.spec?.holderIdentity !== identity) return;
    lease.spec.holderIdentity = undefined;
    try {
      await bounded(api.replaceNamespacedLease({ name, namespace, body: lease }), this.callMs());
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
    }
  }

  /** Forgets every Lease locally (as when the API server is lost): no more acting on any. */
  dropAll(): void {
    this.validUntil.clear();
  }
}
