// The Leases the cloud-routes pods coordinate through, and what they say. A member Lease per LB node
// (held by the pod running there, annotated with its instance) tells who is alive and which instances
// are ours; a Lease per VIP fences its owner on AWS: only its holder writes that VIP's routes.
// Member Leases outlive their pods (released, not deleted), so the routes of a crashed or stopped LB
// node's instance are still known as ours to take over or clean up.
import type { V1Lease } from "@kubernetes/client-node";
import { createHash } from "node:crypto";

export const ROLE_LABEL = "cloud-routes.portable-lb.io/role";
export const GROUP_LABEL = "cloud-routes.portable-lb.io/group";
export const INSTANCE_ANNOTATION = "cloud-routes.portable-lb.io/instance";
export const NODE_ANNOTATION = "cloud-routes.portable-lb.io/node";
/** What routes to this member point at: AWS, its primary ENI; GCP, its instance's URL. */
export const TARGET_ANNOTATION = "cloud-routes.portable-lb.io/target";

export interface LeaseTiming {
  /** A Lease not renewed for this long is free to take (whole seconds, as Leases store it). */
  durationS: number;
  /** How often holders renew, and the loop re-checks members and owners. */
  renewMs: number;
}
export const DEFAULT_ROUTE_LEASE_TIMING: LeaseTiming = { durationS: 3, renewMs: 1_000 };

/** A short, stable label value for a load-balancer class (a class has a slash, a label value may not). */
export function groupLabel(loadBalancerClass: string): string {
  return createHash("sha256").update(loadBalancerClass).digest("hex").slice(0, 16);
}

const dns = (s: string) => s.toLowerCase().replace(/[^a-z0-9-]+/g, "-");

export function memberLeaseName(group: string, node: string): string {
  const name = `plb-routes-${group}-member-${dns(node)}`;
  return name.length <= 253 ? name : `${name.slice(0, 236)}-${groupLabel(node)}`;
}

export function vipLeaseName(group: string, vip: string): string {
  return `plb-routes-${group}-vip-${dns(vip)}`;
}

export interface Member {
  /** The holding pod's identity. */
  identity: string;
  node: string;
  /** Its instance as a providerID. */
  instance: string;
  /** What routes to it point at (TARGET_ANNOTATION). */
  target: string;
}

function expired(lease: V1Lease, now: number): boolean {
  const renewed = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
  return renewed + (lease.spec?.leaseDurationSeconds ?? 0) * 1000 < now;
}

const isMember = (l: V1Lease) => l.metadata?.labels?.[ROLE_LABEL] === "member";

/**
 * The members whose Lease is held and not expired, by identity. A Lease counts as expired only once
 * this pod has watched the Leases for longer than its duration without a renewal (`watchedSince`:
 * since when the watch has been up, undefined while it is down): a cache that has just come back
 * after an API server outage holds every Lease as it was before it, expired in appearance while
 * its holder renews.
 */
export function liveMembers(
  leases: readonly V1Lease[],
  now: number,
  watchedSince: number | undefined,
): Member[] {
  const judged = (l: V1Lease) =>
    watchedSince !== undefined && watchedSince + (l.spec?.leaseDurationSeconds ?? 0) * 1000 <= now;
  return leases
    .filter((l) => isMember(l) && l.spec?.holderIdentity && !(expired(l, now) && judged(l)))
    .map((l) => ({
      identity: l.spec!.holderIdentity!,
      node: l.metadata?.annotations?.[NODE_ANNOTATION] ?? "",
      instance: l.metadata?.annotations?.[INSTANCE_ANNOTATION] ?? "",
      target: l.metadata?.annotations?.[TARGET_ANNOTATION] ?? "",
    }))
    .filter((m) => m.target !== "")
    .sort((a, b) => (a.identity < b.identity ? -1 : 1));
}

/** The route targets of every LB pod of this group (live or not): the only routes we touch. */
export function ourTargets(leases: readonly V1Lease[]): Set<string> {
  return new Set(leases.filter(isMember).flatMap((l) => l.metadata?.annotations?.[TARGET_ANNOTATION] ?? []));
}

/**
 * What the loops act on in the group's Leases at `now`: who holds each (nobody once it expired) and
 * where members' routes point. A renewal changes none of it: reacting to every renewal (every
 * pod's, each second) would only make each renewal trigger more of them.
 */
export function leaseStateKey(leases: readonly V1Lease[], now: number): string {
  const entries = leases.map(
    (l) =>
      [
        l.metadata?.name ?? "",
        expired(l, now) ? "" : (l.spec?.holderIdentity ?? ""),
        l.metadata?.annotations?.[TARGET_ANNOTATION] ?? "",
      ] as const,
  );
  return JSON.stringify(entries.sort((a, b) => a[0].localeCompare(b[0])));
}

/** The time at which the next held Lease expires (when owners may change unannounced). */
export function nextExpiry(leases: readonly V1Lease[], now: number): number | undefined {
  const times = leases
    .filter((l) => l.spec?.holderIdentity && !expired(l, now))
    .map((l) => new Date(l.spec!.renewTime!).getTime() + (l.spec!.leaseDurationSeconds ?? 0) * 1000);
  return times.length ? Math.min(...times) : undefined;
}

/** The Lease fencing the clean-up of a dead instance's routes (GCP): one pod at a time. */
export function cleanupLeaseName(group: string, instance: string): string {
  return `plb-routes-${group}-gone-${groupLabel(instance)}`;
}
