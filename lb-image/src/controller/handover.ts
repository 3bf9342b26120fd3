// A handover: a migration by BGP, where a new platform (B) announces the VIP an old one (A) serves,
// and the router's ECMP moves some of A's open connections to B's LB pods, whose backends know
// nothing of them and would reset them. B's LB pods relay such flows to A's LB nodes instead:
//
//   B's LB pod     a flow missing from its flow table goes, per the Service's handover-relay, to
//                  one of A's LB nodes (hashed on the client's address and port, as the backends
//                  are), in the DSR tunnel: VXLAN to that node's address, the frame to the
//                  broadcast MAC (B does not know A's pod); remembered in the flow table like any
//                  flow. "all": every flow (while both announce, the router's set of next hops
//                  still changes, so even a new connection can move between B's LB pods);
//                  "established": only TCP packets of a connection whose SYN this pod did not see
//                  (once A withdrew: new connections are B's from then on).
//   A's LB node    the node agent steers tunnel packets from B's LB nodes (handover-accept-from)
//                  to its LB pod, as it steers the reflectors' BFD (nodeAgent/podSteering.ts).
//   A's LB pod     takes the broadcast frame as its own (the dsr chain's pkttype rule) and serves
//                  it as any packet: its flow table or A's Maglev table, as every A LB pod would.
//
// The Services' annotations are read here, as pure functions; nftables DSR renders the relay
// (nft/nftRuleset.ts), the tunnels reach the peers (dsr/lbTunnels.ts).
import type { V1Service } from "@kubernetes/client-node";
import {
  HANDOVER_ACCEPT_FROM_ANNOTATION,
  HANDOVER_FROM_ANNOTATION,
  HANDOVER_RELAY_ANNOTATION,
  HANDOVER_RELAYS,
  isIpv4Address,
} from "@portable-lb/core/config";
import { compareKeys, type Handover } from "../dataplane/model.ts";
import type { SkippedItem } from "./desiredState.ts";

type Ref = Pick<SkippedItem, "object" | "uid">;

/** The addresses of a comma-separated annotation, and the entries that are none. */
function addresses(value: string | undefined): { valid: string[]; invalid: string[] } {
  const entries = (value ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  const valid = entries.filter((e) => isIpv4Address(e));
  return {
    valid: [...new Set(valid)].sort(compareKeys),
    invalid: entries.filter((e) => !valid.includes(e)),
  };
}

const problem = (ref: Ref, message: string): SkippedItem => ({
  ...ref,
  kind: "Service",
  reason: "InvalidHandover",
  message,
});

/** The Warning for an address annotation's entries that are no IPv4 address; `whose` names them. */
const notAddresses = (ref: Ref, annotation: string, invalid: string[], whose: string): SkippedItem =>
  problem(
    ref,
    `annotation ${annotation}: ${invalid.map((e) => JSON.stringify(e)).join(", ")} ${invalid.length > 1 ? "are" : "is"} not an IPv4 address; list ${whose} addresses, separated by commas`,
  );

/**
 * The relay a Service asks of this platform's LB pods (handover-from), or none. An address that is
 * none is left out and told (the others still get their flows); an unknown relay value is told and
 * taken as "all", the choice that resets nothing while both platforms announce.
 */
export function handoverOf(svc: V1Service, ref: Ref, skipped: SkippedItem[]): Handover | undefined {
  const a = svc.metadata?.annotations ?? {};
  const from = addresses(a[HANDOVER_FROM_ANNOTATION]);
  if (from.invalid.length)
    skipped.push(notAddresses(ref, HANDOVER_FROM_ANNOTATION, from.invalid, "the old platform's LB node"));
  const relay = a[HANDOVER_RELAY_ANNOTATION] ?? "established";
  const known = (HANDOVER_RELAYS as readonly string[]).includes(relay);
  if (!known)
    skipped.push(
      problem(
        ref,
        `annotation ${HANDOVER_RELAY_ANNOTATION}: "${relay}" is not a relay; use ${HANDOVER_RELAYS.join(" or ")} (relaying all flows meanwhile)`,
      ),
    );
  if (from.valid.length === 0) return undefined;
  return { to: from.valid, relay: known ? (relay as Handover["relay"]) : "all" };
}

/**
 * The LB node addresses of other platforms whose relayed flows this platform's LB nodes take:
 * every Service's handover-accept-from, sorted (the node agent steers their tunnel packets).
 */
export function acceptedPeers(services: readonly V1Service[]): string[] {
  const all = services.flatMap(
    (svc) => addresses(svc.metadata?.annotations?.[HANDOVER_ACCEPT_FROM_ANNOTATION]).valid,
  );
  return [...new Set(all)].sort(compareKeys);
}

/** Invalid handover-accept-from entries, one Warning per Service. */
export function acceptFromProblems(
  services: readonly V1Service[],
  refOf: (svc: V1Service) => Ref,
): SkippedItem[] {
  return services.flatMap((svc) => {
    const { invalid } = addresses(svc.metadata?.annotations?.[HANDOVER_ACCEPT_FROM_ANNOTATION]);
    return invalid.length
      ? [
          notAddresses(
            refOf(svc),
            HANDOVER_ACCEPT_FROM_ANNOTATION,
            invalid,
            "the new platform's LB node and LB pod",
          ),
        ]
      : [];
  });
}
