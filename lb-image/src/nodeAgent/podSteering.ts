// Packets that arrive at this node's own address but are the LB pod's, handed to the LB pod the
// VIP pools are routed to by a stateless rewrite before connection tracking, so a change of pod
// applies to the very next packet (with a conntrack DNAT, a flow kept alive would stay on its first,
// wrong, entry). Two kinds:
// - Multihop BFD from the route reflectors. The pod's BGP and BFD packets to the reflectors leave
//   the node masqueraded to the node's address (flannel masquerades pod traffic leaving the pod
//   network), so each reflector knows the speaker by the node's address and sends its BFD control
//   packets there (UDP 4784, RFC 5883): each one a new flow, not a reply, which the node would take
//   for itself and drop. BGP needs nothing (its TCP replies follow the connection's NAT), but
//   without BFD the router's path through this node falls back to the hold timer.
// - A handover's relayed flows (controller/handover.ts): DSR tunnel packets (UDP 4789) from the LB
//   nodes of the platform taking a VIP over, which its LB pods send to this node's address.
import { z } from "zod";
import { CommandError, run } from "../dataplane/exec.ts";
import { DSR_UDP_PORT } from "../dataplane/dsr/dsrTunnel.ts";

export const STEERING_TABLE = "portable_lb_node";
/** Multihop BFD control packets (RFC 5883). */
export const BFD_MULTIHOP_PORT = 4784;

/** What arrives here for the LB pod, and its address (or none: nothing is steered). */
export interface PodSteering {
  podIp: string | undefined;
  /** The route reflectors, whose BFD goes to the pod. */
  reflectors: string[];
  /** Other platforms' LB nodes, whose relayed flows go to the pod (handover-accept-from). */
  handoverPeers: string[];
}

/** The chains of the table: what each steers, by source and UDP port. */
const CHAINS = [
  { name: "bfd", sources: "reflectors", port: BFD_MULTIHOP_PORT },
  { name: "handover", sources: "handoverPeers", port: DSR_UDP_PORT },
] as const;

const T = `ip ${STEERING_TABLE}`;

/** The steering to have: none (no table) without a pod, or with nothing to steer to it. */
export function desiredSteering(s: PodSteering): PodSteering | undefined {
  if (!s.podIp || s.reflectors.length + s.handoverPeers.length === 0) return undefined;
  return { podIp: s.podIp, reflectors: [...s.reflectors].sort(), handoverPeers: [...s.handoverPeers].sort() };
}

/** One atomic `nft -f` script that makes the table exactly `s`, or removes it. */
export function steeringScript(s: PodSteering | undefined): string {
  const lines = [`add table ${T}`, `delete table ${T}`];
  if (s) {
    lines.push(`add table ${T}`);
    for (const c of CHAINS) {
      if (s[c.sources].length === 0) continue;
      lines.push(
        `add chain ${T} ${c.name} { type filter hook prerouting priority raw ; policy accept ; }`,
        `add rule ${T} ${c.name} ip saddr { ${s[c.sources].join(", ")} } udp dport ${c.port} notrack ip daddr set ${s.podIp}`,
      );
    }
  }
  return lines.map((l) => `${l}\n`).join("");
}

const exprSchema = z.array(z.record(z.string(), z.unknown()));
const listingSchema = z.object({
  nftables: z.array(z.object({ rule: z.object({ chain: z.string(), expr: exprSchema }).optional() }).loose()),
});

/** The steering `nft -j list table` shows; "other" for anything else in the table (it is replaced). */
export function parseSteering(json: string): PodSteering | "other" {
  const rules = listingSchema.parse(JSON.parse(json)).nftables.flatMap((o) => (o.rule ? [o.rule] : []));
  const found: PodSteering = { podIp: undefined, reflectors: [], handoverPeers: [] };
  const seen = new Set<string>();
  for (const rule of rules) {
    const chain = CHAINS.find((c) => c.name === rule.chain);
    if (!chain || seen.has(chain.name)) return "other";
    seen.add(chain.name);
    let sources: string[] | undefined;
    let podIp: string | undefined;
    let port: unknown;
    for (const e of rule.expr) {
      const match = e.match as { left?: { payload?: { field?: string } }; right?: unknown } | undefined;
      const mangle = e.mangle as { key?: { payload?: { field?: string } }; value?: unknown } | undefined;
      if (match?.left?.payload?.field === "saddr") {
        const right = match.right as string | { set?: string[] };
        sources = typeof right === "string" ? [right] : right.set;
      } else if (match?.left?.payload?.field === "dport") port = match.right;
      else if (mangle?.key?.payload?.field === "daddr" && typeof mangle.value === "string")
        podIp = mangle.value;
    }
    if (!sources || !podIp || port !== chain.port) return "other";
    if (found.podIp !== undefined && found.podIp !== podIp) return "other";
    found.podIp = podIp;
    found[chain.sources] = [...sources].sort();
  }
  return found.podIp === undefined ? "other" : found;
}

const sameSteering = (a: PodSteering, b: PodSteering) =>
  a.podIp === b.podIp &&
  a.reflectors.join() === b.reflectors.join() &&
  a.handoverPeers.join() === b.handoverPeers.join();

/** Makes the kernel hold exactly `want` (its own table only) by diff; true when it changed anything. */
export async function applySteering(nft: [string, ...string[]], want: PodSteering): Promise<boolean> {
  const desired = desiredSteering(want);
  let current: PodSteering | "other" | undefined;
  try {
    current = parseSteering(await run([...nft, "-j", "list", "table", "ip", STEERING_TABLE]));
  } catch (err) {
    if (!(err instanceof CommandError && /No such file or directory/.test(err.stderr))) throw err;
  }
  const same =
    current === desired ||
    (current !== undefined && current !== "other" && desired !== undefined && sameSteering(current, desired));
  if (same) return false;
  await run([...nft, "-f", "-"], steeringScript(desired));
  return true;
}
