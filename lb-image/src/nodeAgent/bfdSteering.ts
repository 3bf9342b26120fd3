// Multihop BFD from the route reflectors to this node's LB pod. The pod's BGP and BFD packets to
// the reflectors leave the node masqueraded to the node's address (flannel masquerades pod traffic
// leaving the pod network), so each reflector knows the speaker by the node's address and sends
// its BFD control packets there (UDP 4784, RFC 5883): each one a new flow, not a reply, which the
// node would take for itself and drop. BGP needs nothing (its TCP replies follow the connection's
// NAT), but without BFD the router's path through this node falls back to the hold timer. So the
// node hands the reflectors' BFD packets to the LB pod the VIP pools are routed to: a stateless
// rewrite before connection tracking, so a change of pod applies to the very next packet (with a
// conntrack DNAT, the flow the reflector keeps alive would stay on its first, wrong, entry).
import { z } from "zod";
import { CommandError, run } from "../dataplane/exec.ts";

export const BFD_STEERING_TABLE = "portable_lb_node";
/** Multihop BFD control packets (RFC 5883). */
export const BFD_MULTIHOP_PORT = 4784;

/** Where the reflectors' BFD packets to this node go: the LB pod's address, or nowhere. */
export interface BfdSteering {
  reflectors: string[];
  podIp: string | undefined;
}

const T = `ip ${BFD_STEERING_TABLE}`;

/** The steering to have: none (no table) without a pod or reflectors. */
export function desiredSteering(s: BfdSteering): BfdSteering | undefined {
  return s.podIp && s.reflectors.length > 0
    ? { reflectors: [...s.reflectors].sort(), podIp: s.podIp }
    : undefined;
}

/** One atomic `nft -f` script that makes the table exactly `s`, or removes it. */
export function steeringScript(s: BfdSteering | undefined): string {
  const lines = [`add table ${T}`, `delete table ${T}`];
  if (s)
    lines.push(
      `add table ${T}`,
      `add chain ${T} bfd { type filter hook prerouting priority raw ; policy accept ; }`,
      `add rule ${T} bfd ip saddr { ${s.reflectors.join(", ")} } udp dport ${BFD_MULTIHOP_PORT} notrack ip daddr set ${s.podIp}`,
    );
  return lines.map((l) => `${l}\n`).join("");
}

const exprSchema = z.array(z.record(z.string(), z.unknown()));
const listingSchema = z.object({
  nftables: z.array(z.object({ rule: z.object({ chain: z.string(), expr: exprSchema }).optional() }).loose()),
});

/** The steering `nft -j list table` shows; "other" for anything else in the table (it is replaced). */
export function parseSteering(json: string): BfdSteering | "other" {
  const rules = listingSchema.parse(JSON.parse(json)).nftables.flatMap((o) => (o.rule ? [o.rule] : []));
  if (rules.length !== 1 || rules[0]!.chain !== "bfd") return "other";
  let reflectors: string[] | undefined;
  let podIp: string | undefined;
  let port: unknown;
  for (const e of rules[0]!.expr) {
    const match = e.match as { left?: { payload?: { field?: string } }; right?: unknown } | undefined;
    const mangle = e.mangle as { key?: { payload?: { field?: string } }; value?: unknown } | undefined;
    if (match?.left?.payload?.field === "saddr") {
      const right = match.right as string | { set?: string[] };
      reflectors = typeof right === "string" ? [right] : right.set;
    } else if (match?.left?.payload?.field === "dport") port = match.right;
    else if (mangle?.key?.payload?.field === "daddr" && typeof mangle.value === "string")
      podIp = mangle.value;
  }
  if (!reflectors || !podIp || port !== BFD_MULTIHOP_PORT) return "other";
  return { reflectors: [...reflectors].sort(), podIp };
}

/** Makes the kernel hold exactly `want` (its own table only) by diff; true when it changed anything. */
export async function applySteering(nft: [string, ...string[]], want: BfdSteering): Promise<boolean> {
  const desired = desiredSteering(want);
  let current: BfdSteering | "other" | undefined;
  try {
    current = parseSteering(await run([...nft, "-j", "list", "table", "ip", BFD_STEERING_TABLE]));
  } catch (err) {
    if (!(err instanceof CommandError && /No such file or directory/.test(err.stderr))) throw err;
  }
  const same =
    current === desired ||
    (current !== undefined &&
      current !== "other" &&
      desired !== undefined &&
      current.podIp === desired.podIp &&
      current.reflectors.join() === desired.reflectors.join());
  if (same) return false;
  await run([...nft, "-f", "-"], steeringScript(desired));
  return true;
}
