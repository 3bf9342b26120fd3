// Which VIPs this LB pod announces, as a pure function of what its data plane holds and what the
// Services ask: a VIP is announced only while at least one of its services has a backend taking new
// flows (weight > 0), so routers never send traffic to a pod that would drop it, and only while its
// Service does not ask to be held back (portable-lb.io/announce "false": still served, not
// announced). (Draining is SpeakerControl's.)
import type { VirtualService } from "../dataplane/model.ts";

/** Why a VIP the data plane holds is not handed on to be announced (the metric's reasons). */
export const HELD_BACK_REASONS = ["AnnounceDisabled", "NoReadyBackend"] as const;
export type HeldBackReason = (typeof HELD_BACK_REASONS)[number];

export interface Announcement {
  /** Sorted. */
  vips: string[];
  /** The VIPs held back, by reason (the first that applies, in HELD_BACK_REASONS' order). */
  heldBack: Record<HeldBackReason, string[]>;
}

export function announcement(
  services: VirtualService[],
  disabled: ReadonlySet<string> = new Set(),
): Announcement {
  const ready = new Set<string>();
  const all = new Set<string>();
  for (const s of services) {
    all.add(s.vip);
    if (s.backends.some((b) => b.weight > 0)) ready.add(s.vip);
  }
  const heldBack: Record<HeldBackReason, string[]> = { AnnounceDisabled: [], NoReadyBackend: [] };
  const vips: string[] = [];
  for (const vip of [...all].sort()) {
    if (disabled.has(vip)) heldBack.AnnounceDisabled.push(vip);
    else if (!ready.has(vip)) heldBack.NoReadyBackend.push(vip);
    else vips.push(vip);
  }
  return { vips, heldBack };
}
