// The source-range firewall's nft table, shared by both engines: a Service's loadBalancerSourceRanges
// admit only their clients, so every packet to one of its VIP·protocol·ports whose source lies in
// none of them is dropped, in the LB pod, before anything else sees it (priority -310: before the
// DSR marking at -300, conntrack at -200 and IPVS at input), on every packet rather than only a
// connection's first, since DSR flows are untracked. One rule and two sets, so a service without
// ranges costs one failed lookup; with no restricted service there is no table at all.
// Written whole, atomically, like the IPVS engine's masquerade table; read back strictly (nft -j).
import { ipv4ToNumber, numberToIpv4 } from "../ipv4.ts";
import { parseServiceKey, serviceKey, type VirtualService } from "../model.ts";
import { elementServiceKey as keyOf, nftObjects, sameJson as same } from "../nftJson.ts";

export const FIREWALL_TABLE = "portable_lb_firewall";
const T = `ip ${FIREWALL_TABLE}`;
export const FIREWALL_PRIORITY = -310;
const SERVICE_TYPE = ["ipv4_addr", "inet_proto", "inet_service"];
const ALLOWED_TYPE = [...SERVICE_TYPE, "ipv4_addr"];
const SERVICE = "ip daddr . meta l4proto . th dport";
const RULE = `${SERVICE} @restricted ${SERVICE} . ip saddr != @allowed counter drop`;

/** Service key -> its admitted source ranges ("first-last"), for every restricted service. */
export type FirewallState = Map<string, string[]>;

/** What the table must hold for `services`: the ranges of each one that has them. */
export function firewallState(services: VirtualService[]): FirewallState {
  return new Map(
    services.flatMap((s) => (s.sourceRanges === undefined ? [] : [[serviceKey(s), s.sourceRanges] as const])),
  );
}

export function sameFirewall(a: FirewallState, b: FirewallState): boolean {
  if (a.size !== b.size) return false;
  for (const [key, ranges] of a) {
    const other = b.get(key);
    if (!other || other.length !== ranges.length || other.some((r, i) => r !== ranges[i])) return false;
  }
  return true;
}

/** An `nft -f` script that makes the table hold exactly `state` (none at all when it is empty). */
export function firewallScript(state: FirewallState): string {
  // add-then-delete: the delete cannot fail on a missing table, and all of it is one transaction.
  const lines = [`add table ${T}`, `delete table ${T}`];
  if (state.size > 0) {
    const service = (key: string) => {
      const { vip, protocol, port } = parseServiceKey(key);
      return `${vip} . ${protocol} . ${port}`;
    };
    const allowed = [...state].flatMap(([key, ranges]) => ranges.map((r) => `${service(key)} . ${r}`));
    lines.push(
      `add table ${T}`,
      `add set ${T} restricted { type ${SERVICE_TYPE.join(" . ")} ; }`,
      `add set ${T} allowed { type ${ALLOWED_TYPE.join(" . ")} ; flags interval ; }`,
      `add chain ${T} prerouting { type filter hook prerouting priority ${FIREWALL_PRIORITY} ; policy accept ; }`,
      `add rule ${T} prerouting ${RULE}`,
      `add element ${T} restricted { ${[...state.keys()].map(service).join(", ")} }`,
      ...(allowed.length ? [`add element ${T} allowed { ${allowed.join(", ")} }`] : []),
    );
  }
  return lines.join("\n") + "\n";
}

// The rule as `nft -j` reads it back, without its counter's values.
const SERVICE_EXPR = [
  { payload: { protocol: "ip", field: "daddr" } },
  { meta: { key: "l4proto" } },
  { payload: { protocol: "th", field: "dport" } },
];
const RULE_EXPR = [
  { match: { op: "==", left: { concat: SERVICE_EXPR }, right: "@restricted" } },
  {
    match: {
      op: "!=",
      left: { concat: [...SERVICE_EXPR, { payload: { protocol: "ip", field: "saddr" } }] },
      right: "@allowed",
    },
  },
  { counter: null },
  { drop: null },
];

/** What `nft -j list table` showed: the state, or why the table is not ours as written. */
export type FirewallRead =
  { state: FirewallState; problem?: undefined } | { state?: undefined; problem: string };

/** Reads `nft -j list table ip portable_lb_firewall`; anything but the table as written is a problem. */
export function parseFirewallTable(json: string): FirewallRead {
  const of = nftObjects(json);
  if (!of) return { problem: "nft -j printed something that is not JSON" };
  const sets = of("set");
  const chains = of("chain");
  const rules = of("rule");
  const restricted = sets.find((s) => s.name === "restricted");
  const allowed = sets.find((s) => s.name === "allowed");
  if (
    sets.length !== 2 ||
    !restricted ||
    !same(restricted.type, SERVICE_TYPE) ||
    restricted.flags !== undefined ||
    !allowed ||
    !same(allowed.type, ALLOWED_TYPE) ||
    !same(allowed.flags, ["interval"])
  )
    return {
      problem: "its sets are not restricted (address . protocol . port) and allowed (with a source interval)",
    };
  const [chain] = chains;
  if (
    chains.length !== 1 ||
    chain!.name !== "prerouting" ||
    chain!.type !== "filter" ||
    chain!.hook !== "prerouting" ||
    chain!.prio !== FIREWALL_PRIORITY ||
    chain!.policy !== "accept"
  )
    return {
      problem: `it has not exactly one chain, prerouting, a filter on prerouting at ${FIREWALL_PRIORITY}`,
    };
  const expr = (rules[0]?.expr as Record<string, unknown>[] | undefined)?.map((e) =>
    "counter" in e ? { counter: null } : e,
  );
  if (rules.length !== 1 || !same(expr, RULE_EXPR))
    return { problem: `its chain does not hold exactly: ${RULE}` };

  const state: FirewallState = new Map();
  for (const e of (restricted.elem as unknown[] | undefined) ?? []) {
    const key = keyOf((e as { concat?: unknown[] }).concat);
    if (!key)
      return {
        problem: `restricted holds an element that is not address . tcp|udp . port: ${JSON.stringify(e)}`,
      };
    state.set(key, []);
  }
  for (const e of (allowed.elem as unknown[] | undefined) ?? []) {
    const parts = (e as { concat?: unknown[] }).concat;
    const key = keyOf(parts);
    const range = parts && intervalOf(parts[3]);
    const ranges = key === undefined ? undefined : state.get(key);
    if (!key || !range || !ranges)
      return {
        problem: `allowed holds an element that is not a restricted service . a source range: ${JSON.stringify(e)}`,
      };
    ranges.push(range);
  }
  for (const ranges of state.values()) ranges.sort((a, b) => numberOf(a) - numberOf(b));
  return { state };
}

/** An interval as written ("first-last"), from nft's address, prefix or range. */
function intervalOf(v: unknown): string | undefined {
  if (typeof v === "string") return `${v}-${v}`;
  const o = v as { prefix?: { addr?: unknown; len?: unknown }; range?: unknown[] } | undefined;
  if (typeof o?.prefix?.addr === "string" && typeof o.prefix.len === "number") {
    const last = ipv4ToNumber(o.prefix.addr) + 2 ** (32 - o.prefix.len) - 1;
    return `${o.prefix.addr}-${numberToIpv4(last)}`;
  }
  if (Array.isArray(o?.range) && typeof o.range[0] === "string" && typeof o.range[1] === "string")
    return `${o.range[0]}-${o.range[1]}`;
  return undefined;
}

const numberOf = (range: string) => ipv4ToNumber(range.split("-")[0]!);
