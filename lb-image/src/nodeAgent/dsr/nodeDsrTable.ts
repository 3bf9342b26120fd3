// Direct server return's node half, in its own nft table (read back and changed by diff), on every
// node while any DSR VIP exists; its set holds every DSR VIP:
//   - `notrack` for packets forwarded TO a VIP: an LB node passes the client's side of a flow to
//     its LB pod, but the replies go from the backend's node straight to the client, so conntrack
//     would see half a flow and call some of its packets INVALID, which kube-proxy drops in FORWARD;
//   - `notrack` for packets forwarded FROM a VIP: the backend's node never sees the client's side
//     (it arrives encapsulated, to the pod's address), so every reply would be INVALID;
//   (packets to the node itself keep conntrack: an LB pod's node-route check asks the node agent
//   from a VIP, and a host firewall may accept only tracked traffic)
//   - `notrack` for our tunnel's packets passing through (UDP 4789 with our VNI, LB pod to backend
//     pod): each connection's flow hashes to its own VXLAN source port, so every new connection
//     would leave an unreplied UDP entry on the LB's node and on the backend's for 30 s; at high
//     connection rates those fill the node's conntrack table, which then drops all its traffic.
//   - only where local DSR backend pods are: an MSS clamp on the SYN-ACKs from a VIP: the client's
//     segments reach the backend through the LB's tunnel (+DSR_OVERHEAD bytes), but the backend's
//     SYN-ACK goes straight to the client, so the MSS the client learns must leave room for the
//     tunnel. Only larger values are lowered.
// No DSR VIP: no table at all.
import { z } from "zod";
import { DSR_OVERHEAD, DSR_UDP_PORT, DSR_VNI } from "../../dataplane/dsr/dsrTunnel.ts";
import { compareKeys } from "../../dataplane/model.ts";

export const DSR_NODE_TABLE = "portable_lb_dsr";
const T = `ip ${DSR_NODE_TABLE}`;
/** IPv4 (20) and TCP (20) headers without options. */
const TCP_IP_HEADERS = 40;
/** A VXLAN header's VNI, in bits from the start of the UDP header (8 bytes UDP, 4 of VXLAN flags). */
const VNI_OFFSET_BITS = 96;

export interface NodeDsrTable {
  /** Every DSR VIP. */
  vips: string[];
  /** The MSS SYN-ACKs from a VIP are clamped to; none without local DSR backend pods. */
  mss?: number;
}

/** The table to have: every DSR VIP, and the MSS that fits the smallest local DSR pod's MTU. */
export function desiredNodeTable(vips: string[], podMtus: number[]): NodeDsrTable | undefined {
  if (vips.length === 0) return undefined;
  const sorted = [...vips].sort(compareKeys);
  if (podMtus.length === 0) return { vips: sorted };
  return { vips: sorted, mss: Math.min(...podMtus) - DSR_OVERHEAD - TCP_IP_HEADERS };
}

const elements = (vips: string[]) => `{ ${vips.join(", ")} }`;

/** One atomic `nft -f` script that makes the table exactly `t`, or removes it. */
export function nodeTableScript(t: NodeDsrTable | undefined): string {
  const lines = [`add table ${T}`, `delete table ${T}`];
  if (t)
    lines.push(
      `add table ${T}`,
      `add set ${T} vips { type ipv4_addr ; }`,
      ...(t.vips.length > 0 ? [`add element ${T} vips ${elements(t.vips)}`] : []),
      `add chain ${T} forwarded { type filter hook prerouting priority raw ; policy accept ; }`,
      `add rule ${T} forwarded ip daddr @vips fib daddr type != local notrack`,
      `add rule ${T} forwarded ip saddr @vips fib daddr type != local notrack`,
      `add rule ${T} forwarded udp dport ${DSR_UDP_PORT} @th,${VNI_OFFSET_BITS},24 ${DSR_VNI} notrack`,
      ...(t.mss === undefined
        ? []
        : [
            `add chain ${T} mss { type filter hook forward priority mangle ; policy accept ; }`,
            `add rule ${T} mss ip saddr @vips tcp flags & (syn | ack) == syn | ack tcp option maxseg size > ${t.mss} tcp option maxseg size set ${t.mss}`,
          ]),
    );
  return lines.map((l) => `${l}\n`).join("");
}

/** Only the VIPs differ: a change of the set's elements, in one transaction. */
export function vipChangeScript(current: string[], desired: string[]): string {
  const add = desired.filter((v) => !current.includes(v));
  const del = current.filter((v) => !desired.includes(v));
  return [
    ...(add.length > 0 ? [`add element ${T} vips ${elements(add)}`] : []),
    ...(del.length > 0 ? [`delete element ${T} vips ${elements(del)}`] : []),
  ]
    .map((l) => `${l}\n`)
    .join("");
}

const listingSchema = z.object({
  nftables: z.array(
    z
      .object({
        set: z
          .object({ name: z.string(), elem: z.array(z.unknown()).optional() })
          .loose()
          .optional(),
        chain: z
          .object({ name: z.string(), hook: z.string().optional(), prio: z.number().optional() })
          .loose()
          .optional(),
        rule: z
          .object({ chain: z.string(), expr: z.array(z.record(z.string(), z.unknown())) })
          .loose()
          .optional(),
      })
      .loose(),
  ),
});

/** The table `nft -j list table` shows; "other" when its shape is not ours (it is then rewritten). */
export function parseNodeTable(json: string): NodeDsrTable | "other" {
  const objects = listingSchema.parse(JSON.parse(json)).nftables;
  const sets = objects.flatMap((o) => (o.set ? [o.set] : []));
  const chains = objects.flatMap((o) => (o.chain ? [o.chain] : []));
  const rules = objects.flatMap((o) => (o.rule ? [o.rule] : []));
  const shape = [
    ...sets.map((s) => `set ${s.name}`),
    ...chains.map((c) => `chain ${c.name} ${c.hook} ${c.prio}`),
    ...rules.map((r) => `rule ${r.chain}`),
  ].sort();
  const hasMss = chains.some((c) => c.name === "mss");
  const expected = [
    "set vips",
    "chain forwarded prerouting -300",
    "rule forwarded",
    "rule forwarded",
    "rule forwarded",
    ...(hasMss ? ["chain mss forward -150", "rule mss"] : []),
  ].sort();
  if (shape.join() !== expected.join()) return "other";
  // The notrack rules, in order: to a VIP, then from one, both only for forwarded packets; the tunnel.
  const notrack = rules.filter((r) => r.chain === "forwarded").map((r) => JSON.stringify(r.expr));
  const untracks = (field: string, rule: string) =>
    rule.includes(`{"payload":{"protocol":"ip","field":"${field}"}},"right":"@vips"`) &&
    ['"notrack"', '"fib"'].every((e) => rule.includes(e));
  const tunnel = [
    `{"payload":{"protocol":"udp","field":"dport"}},"right":${DSR_UDP_PORT}}`,
    `{"payload":{"base":"th","offset":${VNI_OFFSET_BITS},"len":24}},"right":${DSR_VNI}}`,
    '"notrack"',
  ];
  if (!untracks("daddr", notrack[0]!) || !untracks("saddr", notrack[1]!)) return "other";
  if (!tunnel.every((e) => notrack[2]!.includes(e))) return "other";
  const vips = (sets[0]!.elem ?? []).filter((e): e is string => typeof e === "string").sort(compareKeys);
  if (!hasMss) return { vips };
  const mssRule = rules.find((r) => r.chain === "mss")!;
  const mss = mssRule.expr.flatMap((e) => {
    const m = e.mangle as { key?: { "tcp option"?: { name?: string } }; value?: unknown } | undefined;
    return m?.key?.["tcp option"]?.name === "maxseg" && typeof m.value === "number" ? [m.value] : [];
  });
  if (mss.length !== 1 || !JSON.stringify(mssRule.expr).includes(`"right":${mss[0]}}`)) return "other";
  return { vips, mss: mss[0]! };
}

/** The script that turns `current` (undefined: no table) into `desired`, or "" when they agree. */
export function nodeTableChange(
  current: NodeDsrTable | "other" | undefined,
  desired: NodeDsrTable | undefined,
): string {
  if (current === undefined && desired === undefined) return "";
  if (current === undefined || current === "other" || desired === undefined || current.mss !== desired.mss)
    return nodeTableScript(desired);
  return vipChangeScript(current.vips, desired.vips);
}
