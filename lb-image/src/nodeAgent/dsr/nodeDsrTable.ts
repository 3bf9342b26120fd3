// The backend node's half of DSR, in its own nft table (read back and changed by diff):
//   - `notrack` for packets whose source is a DSR VIP, forwarded by the node: it never sees the
//     client's side of these flows (it arrives encapsulated, to the pod's address), so conntrack
//     would call every reply INVALID, and kube-proxy drops INVALID packets in FORWARD. Packets to
//     the node itself keep conntrack (an LB pod's node-route check asks the node agent from a VIP,
//     and a host firewall may accept only tracked traffic);
//   - an MSS clamp on the SYN-ACKs from a VIP: the client's segments reach the backend through the
//     LB's tunnel (+DSR_OVERHEAD bytes), but the backend's SYN-ACK goes straight to the client, so
//     the MSS the client learns must leave room for the tunnel. Only larger values are lowered.
// No DSR VIP with a local backend pod: no table at all.
import { z } from "zod";
import { DSR_OVERHEAD } from "../../dataplane/dsr/dsrTunnel.ts";
import { compareKeys } from "../../dataplane/model.ts";

export const DSR_NODE_TABLE = "portable_lb_dsr";
const T = `ip ${DSR_NODE_TABLE}`;
/** IPv4 (20) and TCP (20) headers without options. */
const TCP_IP_HEADERS = 40;

export interface NodeDsrTable {
  vips: string[];
  /** The MSS SYN-ACKs from a VIP are clamped to. */
  mss: number;
}

/** The table to have: the VIPs, and the MSS that fits the smallest local DSR pod's MTU. */
export function desiredNodeTable(vips: string[], podMtus: number[]): NodeDsrTable | undefined {
  if (vips.length === 0 || podMtus.length === 0) return undefined;
  return { vips: [...vips].sort(compareKeys), mss: Math.min(...podMtus) - DSR_OVERHEAD - TCP_IP_HEADERS };
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
      `add chain ${T} replies { type filter hook prerouting priority raw ; policy accept ; }`,
      `add rule ${T} replies ip saddr @vips fib daddr type != local notrack`,
      `add chain ${T} mss { type filter hook forward priority mangle ; policy accept ; }`,
      `add rule ${T} mss ip saddr @vips tcp flags & (syn | ack) == syn | ack tcp option maxseg size > ${t.mss} tcp option maxseg size set ${t.mss}`,
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
  const expected = [
    "set vips",
    "chain replies prerouting -300",
    "chain mss forward -150",
    "rule replies",
    "rule mss",
  ].sort();
  if (shape.join() !== expected.join()) return "other";
  const exprs = (chain: string) => JSON.stringify(rules.find((r) => r.chain === chain)!.expr);
  const replies = exprs("replies");
  if (!['"notrack"', '"@vips"', '"fib"'].every((e) => replies.includes(e))) return "other";
  const mss = rules
    .find((r) => r.chain === "mss")!
    .expr.flatMap((e) => {
      const m = e.mangle as { key?: { "tcp option"?: { name?: string } }; value?: unknown } | undefined;
      return m?.key?.["tcp option"]?.name === "maxseg" && typeof m.value === "number" ? [m.value] : [];
    });
  if (mss.length !== 1 || !exprs("mss").includes(`"right":${mss[0]}}`)) return "other";
  const vips = (sets[0]!.elem ?? []).filter((e): e is string => typeof e === "string");
  return { vips: vips.sort(compareKeys), mss: mss[0]! };
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
