// What Services ask of the announcements through their annotations, as pure functions of the
// Services: `portable-lb.io/announce: "false"` keeps a Service's VIPs served but out of the
// speaker's exports and the cloud's route tables (a migration's "move traffic" step: another
// platform announces the same VIP; the handover that goes with it: controller/handover.ts).
import type { V1Service } from "@kubernetes/client-node";
import { ANNOUNCE_ANNOTATION } from "@portable-lb/core/config";
import { refOf, statusVips, type SkippedItem } from "../controller/desiredState.ts";

export type ServiceRef = Pick<SkippedItem, "object" | "uid">;

export interface AnnounceIntent {
  /** VIPs whose Service says announce "false", with that Service. */
  heldBack: ReadonlyMap<string, ServiceRef>;
  /** Every VIP in a Service's status, with its Service (to tell a VIP released from one resumed). */
  owners: ReadonlyMap<string, ServiceRef>;
  /** Bad values; those Services' VIPs are announced, as without the annotation. */
  problems: SkippedItem[];
}

export const NO_INTENT: AnnounceIntent = { heldBack: new Map(), owners: new Map(), problems: [] };

/** What `services` (ours) ask: which of their VIPs are held back, and which values are wrong. */
export function announceIntent(services: readonly V1Service[]): AnnounceIntent {
  const heldBack = new Map<string, ServiceRef>();
  const owners = new Map<string, ServiceRef>();
  const problems: SkippedItem[] = [];
  for (const svc of services) {
    const vips = statusVips(svc);
    for (const vip of vips) owners.set(vip, refOf(svc));
    const value = svc.metadata?.annotations?.[ANNOUNCE_ANNOTATION];
    if (value === undefined || value === "true") continue;
    if (value === "false") {
      for (const vip of vips) heldBack.set(vip, refOf(svc));
      continue;
    }
    // Announcing is what the pods do without the annotation, and never leaves a VIP unreachable.
    problems.push({
      ...refOf(svc),
      kind: "Service",
      reason: "InvalidAnnounce",
      message: `annotation ${ANNOUNCE_ANNOTATION} must be "true" or "false" (got ${JSON.stringify(value)}); its VIPs are announced as without it. Set it to "false" to stop announcing them (the LB pods keep serving them), or remove it`,
    });
  }
  return { heldBack, owners, problems };
}

/** Whether two intents hold back the same VIPs for the same Services. */
export function sameHeldBack(a: AnnounceIntent, b: AnnounceIntent): boolean {
  if (a.heldBack.size !== b.heldBack.size) return false;
  for (const [vip, ref] of a.heldBack) {
    const other = b.heldBack.get(vip);
    if (other?.object !== ref.object || other.uid !== ref.uid) return false;
  }
  return true;
}

/**
 * Normal Events, one per Service, for the VIPs `pod` stopped or started announcing (or routing, in
 * cloud-routes mode) between `before` and `after` because of the annotation. A VIP that left its
 * Service (released, Service deleted) is no news of this kind.
 */
export function announceChanges(
  before: AnnounceIntent,
  after: AnnounceIntent,
  pod: string,
  routing: "bgp" | "cloud-routes",
): SkippedItem[] {
  const [verb, doing] = routing === "bgp" ? ["announces", "announcing"] : ["routes", "routing"];
  const same = (a: ServiceRef | undefined, b: ServiceRef | undefined) =>
    a !== undefined && a.object === b?.object && a.uid === b.uid;
  const stopped = new Map<string, { ref: ServiceRef; vips: string[] }>();
  const resumed = new Map<string, { ref: ServiceRef; vips: string[] }>();
  const add = (to: typeof stopped, ref: ServiceRef, vip: string) => {
    const key = `${ref.object}/${ref.uid ?? ""}`;
    const entry = to.get(key) ?? { ref, vips: [] };
    entry.vips.push(vip);
    to.set(key, entry);
  };
  for (const [vip, ref] of after.heldBack) if (!same(before.heldBack.get(vip), ref)) add(stopped, ref, vip);
  for (const [vip, ref] of before.heldBack)
    if (!after.heldBack.has(vip) && same(after.owners.get(vip), ref)) add(resumed, ref, vip);
  const vipList = (vips: string[]) => `VIP${vips.length > 1 ? "s" : ""} ${vips.sort().join(", ")}`;
  return [
    ...[...stopped.values()].map(({ ref, vips }) => ({
      ...ref,
      kind: "Service" as const,
      reason: "AnnounceDisabled",
      message: `LB pod ${pod} is not ${doing} ${vipList(vips)} (annotation ${ANNOUNCE_ANNOTATION} is "false"); it keeps serving the connections and packets that still reach it. Remove the annotation or set it to "true" to announce again`,
    })),
    ...[...resumed.values()].map(({ ref, vips }) => ({
      ...ref,
      kind: "Service" as const,
      reason: "AnnounceEnabled",
      message: `LB pod ${pod} ${verb} ${vipList(vips)} again (annotation ${ANNOUNCE_ANNOTATION} is no longer "false"), while the Service has a ready endpoint`,
    })),
  ];
}
