// Direct server return: how an LB pod hands a flow to a backend pod, and what both ends agree on.
//
//   LB pod:      prerouting marks the packet with its backend (the Maglev table, or the flow table
//                for a flow already seen); an ip rule per backend sends that mark to the backend's
//                own routing table, whose one route encapsulates the packet unchanged (destination
//                still the VIP) in VXLAN toward the backend pod's IP.
//   backend pod: a VXLAN device decapsulates; the VIP is local (on `lo`), so the pod's socket
//                answers from the VIP, straight to the client through its node, never via the LB.
//
// Lightweight-tunnel encapsulation over a metadata ("external") VXLAN device needs no per-backend
// device, and this kernel has neither ipip nor GUE (MACHINE-FACTS). Where IPVS exists its tunnel
// mode does the LB half instead, in IPIP: the backend pod then decapsulates on an IPIP device.

import { ipv4ToNumber } from "../ipv4.ts";

// Each end's VXLAN device has a name of its own: a node agent that adopts what an earlier run left
// in the pod namespaces of its node must never take an LB pod's device for a backend's.
/** The LB pod's encapsulating VXLAN device. */
export const DSR_LB_DEVICE = "plb-dsr";
/** The backend pod's decapsulating VXLAN device. */
export const DSR_BACKEND_DEVICE = "plb-dsr-rx";
/**
 * The backend pod's decapsulating IPIP device, for LBs on the IPVS engine (tunnel mode sends IPIP to
 * the backend pod's address): a metadata ("external") device takes every IPIP packet to the pod.
 */
export const DSR_BACKEND_IPIP_DEVICE = "plb-dsr-ipip";
/** UDP port of the tunnel, in the pods' own network namespaces (IANA's VXLAN port). */
export const DSR_UDP_PORT = 4789;
/** Any VNI works on a metadata device; a fixed one keeps captures readable ("plb"). */
export const DSR_VNI = 0x706c62;
/** VXLAN over IPv4 adds 50 bytes (outer IP 20, UDP 8, VXLAN 8, inner Ethernet 14). */
export const DSR_OVERHEAD = 50;

// The inner frame needs a destination MAC the backend's device accepts as its own, and VXLAN drops
// a frame whose source MAC is the receiver's own (loop guard): so the backend's device has a fixed
// MAC, each LB pod's device one of its own (lbDeviceMac: LB pods also tunnel to each other, in a
// handover), and the LB reaches the backend through one permanent neighbour, a link-local next hop.
/** The backend pod's decapsulating device. */
export const DSR_BACKEND_MAC = "02:70:6c:62:00:01";
/** The LB pod's encapsulating device where its uplink's MAC is unknown (the fast path's frames too). */
export const DSR_LB_MAC = "02:70:6c:62:00:00";
/** The next hop of every encapsulating route on the LB, resolved by a permanent neighbour entry. */
export const DSR_NEXT_HOP = "169.254.255.1";
/**
 * The next hop of the routes to another platform's LB nodes (a handover, controller/handover.ts).
 * Their LB pod has no fixed MAC, so the frame goes to the broadcast address, which every device
 * accepts; the receiving LB pod then takes it as its own (the dsr chain's pkttype rule,
 * nftRuleset.ts).
 */
export const HANDOVER_NEXT_HOP = "169.254.255.2";
export const HANDOVER_NEXT_HOP_MAC = "ff:ff:ff:ff:ff:ff";

/**
 * An LB pod's own MAC for its encapsulating device: its uplink's (unique per pod veth) with the
 * first octet made locally administered and distinct, so no two LB pods share one.
 */
export function lbDeviceMac(uplinkMac: string | undefined): string {
  const octets = uplinkMac?.split(":") ?? [];
  if (octets.length !== 6 || octets.some((o) => !/^[0-9a-f]{2}$/i.test(o))) return DSR_LB_MAC;
  const mac = ["06", ...octets.slice(1)].join(":").toLowerCase();
  return mac === DSR_BACKEND_MAC ? DSR_LB_MAC : mac;
}

/**
 * A backend's fwmark, and its routing table's number on the LB: the pod's IPv4 address as a 32-bit
 * number, unique per backend without any allocation state to keep or adopt.
 */
export function backendMark(ip: string): number {
  return ipv4ToNumber(ip);
}
