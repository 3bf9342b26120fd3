// The IPVS engine's nft table: IPVS NAT mode (-m) rewrites only the destination, so a backend that
// routes to the client some other way would answer from its own address and the connection would
// fail. As kube-proxy's IPVS mode does, packets to a masqueraded service are marked on the way in
// (prerouting; output for the pod's own) and marked packets are masqueraded on the way out, so the
// backend sees the LB pod's address and replies through it. IPVS hands its NAT traffic to
// conntrack (and so to nft NAT) only with net.ipv4.vs.conntrack=1 in the pod's netns (podSpec.ts).
// The table is small (one element per masqueraded service) and always written whole, atomically.
import { parseServiceKey } from "../model.ts";
import { elementServiceKey, nftObjects, sameJson as same } from "../nftJson.ts";

export const SNAT_TABLE = "portable_lb_ipvs";
/** The mark bit for "masquerade me" (kube-proxy's 0x4000; the pod's netns has no other user). */
export const SNAT_MARK = 0x4000;
const T = `ip ${SNAT_TABLE}`;
const MATCH = "ip daddr . meta l4proto . th dport @snat_services";
const MARK = `meta mark set meta mark | ${hex(SNAT_MARK)}`;

const MARK_EXPR = [
  {
    match: {
      op: "==",
      left: {
        concat: [
          { payload: { protocol: "ip", field: "daddr" } },
          { meta: { key: "l4proto" } },
          { payload: { protocol: "th", field: "dport" } },
        ],
      },
      right: "@snat_services",
    },
  },
  { mangle: { key: { meta: { key: "mark" } }, value: { "|": [{ meta: { key: "mark" } }, SNAT_MARK] } } },
];

/** The chains and the one rule each holds: as written, and its expression as `nft -j` reads it back. */
export const SNAT_CHAINS = [
  {
    name: "prerouting",
    type: "filter",
    hook: "prerouting",
    prio: -150,
    rule: `${MATCH} ${MARK}`,
    expr: MARK_EXPR,
  },
  // The pod's own connections to a VIP (health checks, tests) take the same path.
  { name: "output", type: "route", hook: "output", prio: -150, rule: `${MATCH} ${MARK}`, expr: MARK_EXPR },
  {
    name: "postrouting",
    type: "nat",
    hook: "postrouting",
    prio: 100,
    rule: `meta mark & ${hex(SNAT_MARK)} == ${hex(SNAT_MARK)} masquerade`,
    expr: [
      { match: { op: "==", left: { "&": [{ meta: { key: "mark" } }, SNAT_MARK] }, right: SNAT_MARK } },
      { masquerade: null },
    ],
  },
] as const;
export const SNAT_SET_TYPE = ["ipv4_addr", "inet_proto", "inet_service"];

/** An `nft -f` script that replaces the table with one masquerading exactly `keys` (service keys). */
export function snatScript(keys: Iterable<string>): string {
  const elements = [...keys].map((k) => {
    const { protocol, vip, port } = parseServiceKey(k);
    return `${vip} . ${protocol} . ${port}`;
  });
  return [
    // add-then-delete: the delete cannot fail on a missing table, and all of it is one transaction.
    `add table ${T}`,
    `delete table ${T}`,
    `add table ${T}`,
    `add set ${T} snat_services { type ${SNAT_SET_TYPE.join(" . ")} ; }`,
    ...SNAT_CHAINS.flatMap((c) => [
      `add chain ${T} ${c.name} { type ${c.type} hook ${c.hook} priority ${c.prio} ; policy accept ; }`,
      `add rule ${T} ${c.name} ${c.rule}`,
    ]),
    ...(elements.length ? [`add element ${T} snat_services { ${elements.join(", ")} }`] : []),
    "",
  ].join("\n");
}

/** What `nft -j list table` showed: the masqueraded services, or why the table is not ours as written. */
export type SnatRead = { keys: Set<string>; problem?: undefined } | { keys?: undefined; problem: string };

/** Reads `nft -j list table ip portable_lb_ipvs` output; anything but the table as written is a problem. */
export function parseSnatTable(json: string): SnatRead {
  const of = nftObjects(json);
  if (!of) return { problem: "nft -j printed something that is not JSON" };
  const sets = of("set");
  const chains = of("chain");
  const rules = of("rule");
  if (sets.length !== 1 || sets[0]!.name !== "snat_services" || !same(sets[0]!.type, SNAT_SET_TYPE))
    return { problem: "its set is not snat_services of ipv4_addr . inet_proto . inet_service" };
  if (chains.length !== SNAT_CHAINS.length || rules.length !== SNAT_CHAINS.length)
    return {
      problem: `it has ${chains.length} chains and ${rules.length} rules, not ${SNAT_CHAINS.length} of each`,
    };
  for (const c of SNAT_CHAINS) {
    const chain = chains.find((x) => x.name === c.name);
    if (
      !chain ||
      chain.type !== c.type ||
      chain.hook !== c.hook ||
      chain.prio !== c.prio ||
      chain.policy !== "accept"
    )
      return { problem: `chain ${c.name} is missing or not a ${c.type} chain on ${c.hook} at ${c.prio}` };
    const rule = rules.find((r) => r.chain === c.name);
    if (!rule || !same(rule.expr, c.expr)) return { problem: `chain ${c.name} does not hold: ${c.rule}` };
  }
  const keys = new Set<string>();
  for (const e of (sets[0]!.elem as unknown[] | undefined) ?? []) {
    const key = elementServiceKey((e as { concat?: unknown[] }).concat);
    if (!key)
      return {
        problem: `its set holds an element that is not address . tcp|udp . port: ${JSON.stringify(e)}`,
      };
    keys.add(key);
  }
  return { keys };
}

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}
