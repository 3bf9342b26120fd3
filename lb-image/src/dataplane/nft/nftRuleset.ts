// nft scripts for the nftables engine: the table skeleton, and one transaction per change that
// touches only the services that changed. `nft -f` applies a script atomically: all or nothing.
import { DSR_LB_DEVICE, DSR_UDP_PORT } from "../dsr/dsrTunnel.ts";
import { serviceKey } from "../model.ts";
import { NFT_TABLE, objectId, type NftService } from "./nftState.ts";

const T = `ip ${NFT_TABLE}`;
const lines = (statements: string[]) => statements.map((l) => `${l}\n`).join("");
/** Fixed hash seed: every LB pod must hash a flow the same way to pick the same backend. */
export const FLOW_HASH_SEED = "0x706c62";

const DISPATCH = "ip daddr . meta l4proto . th dport vmap @services";
const DSR_DISPATCH = "ip daddr . meta l4proto . th dport vmap @dsr_services";
const TUNNEL_NOTRACK = `udp dport ${DSR_UDP_PORT} notrack`;
const PROTOCOL_NUMBERS = { tcp: 6, udp: 17 } as const;

/**
 * How long an LB pod remembers which backend a flow went to when it stops seeing packets of it
 * (every packet refreshes it). Long enough for idle keep-alive connections; a flow idle longer
 * follows the Maglev table again, which only differs if its backends changed meanwhile.
 */
export const FLOW_TIMEOUT_S = 300;
/** Flows remembered per protocol (~100 bytes each); when full, new flows go by the Maglev table alone. */
export const FLOW_TABLE_SIZE = 262_144;

// The flow key: nft 1.0.6 cannot update a map keyed by five fields with a data expression (it
// aborts), so there is one flow table per protocol, keyed by the 4-tuple.
const flowKey = (p: string) => `ip saddr . ${p} sport . ip daddr . ${p} dport`;
const flowUpdate = (p: keyof typeof PROTOCOL_NUMBERS, key: string) =>
  `update @flows_${p} { ${key} : meta mark }`;
/**
 * A flow this LB pod has seen goes to the backend it went to, whatever the table says now. The
 * lookup comes first: a miss ends the rule before `notrack`, so SNAT flows stay tracked (NAT needs
 * conntrack). An entry whose backend has left is passed over (`fib`: the route its mark selects no
 * longer leaves by the tunnel), and the flow takes the Maglev table's backend: clients reuse ports
 * within the table's timeout, and a new connection bound to a gone backend would reach this pod's
 * own stack, which refuses it (a UDP flow would stay black-holed). nft prints the protocol match
 * folded into the key's `tcp sport`.
 */
const flowHit = (p: keyof typeof PROTOCOL_NUMBERS, key: string, written: boolean) =>
  `${written ? `meta l4proto ${p} ` : ""}${flowLookup(p, key)} ${flowUpdate(p, key)} accept`;
const flowLookup = (p: keyof typeof PROTOCOL_NUMBERS, key: string) =>
  `meta mark set ${key} map @flows_${p} fib daddr . mark oifname "${DSR_LB_DEVICE}" notrack`;
// A map element is deleted by its key; nft's grammar for a map wants the data too, and ignores it.
const flowDelete = (key: string) => `delete @flows_tcp { ${key} : meta mark }`;
/**
 * A TCP flow's entry lives as long as its connection, as far as this pod sees it: a SYN never
 * follows an entry (a client reusing a port within the timeout starts a new connection, which must
 * take the Maglev table's backend as on every other LB pod: one that moves to another LB pod
 * mid-flight is otherwise reset there), and the client's FIN or RST goes where its entry says, then
 * ends it, so that no other LB pod keeps a finished connection's backend for a reused port.
 */
const TCP_FLOW_ENDS = [
  {
    rule: `tcp flags & (syn | ack) == syn ${flowDelete(flowKey("th"))}`,
    listed: `tcp flags 0x2 / 0x2,0x10 ${flowDelete(flowKey("tcp"))}`,
  },
  {
    rule: `tcp flags & (fin | rst) != 0 ${flowLookup("tcp", flowKey("th"))} ${flowDelete(flowKey("th"))} accept`,
    listed: `tcp flags 0x1,0x4 ${flowLookup("tcp", flowKey("tcp"))} ${flowDelete(flowKey("tcp"))} accept`,
  },
];

/**
 * The table's frame: its base chains and their rules, as written and as `nft -n list` prints them
 * back (the strict reader expects exactly this).
 */
export const BASE_CHAINS = [
  {
    name: "prerouting",
    type: "nat",
    hook: "prerouting",
    priority: -100,
    rules: [{ rule: DISPATCH, listed: DISPATCH }],
  },
  // Traffic that starts inside the LB pod (health checks, tests) takes the same path.
  {
    name: "output",
    type: "nat",
    hook: "output",
    priority: -100,
    rules: [{ rule: DISPATCH, listed: DISPATCH }],
  },
  // SNAT toward backends, so replies come back through this LB pod (paper's setup).
  {
    name: "postrouting",
    type: "nat",
    hook: "postrouting",
    priority: 100,
    rules: [{ rule: "ct status dnat masquerade", listed: "ct status 0x20 masquerade" }],
  },
  // DSR: before conntrack (the LB sees one direction of these flows only, so it tracks none), each
  // packet gets its backend's mark, from the flow table or, for a flow new to this pod, the
  // service's Maglev table; routing then sends it into that backend's tunnel.
  {
    name: "dsr",
    type: "filter",
    hook: "prerouting",
    priority: -300,
    rules: [
      // A handover's packets, relayed here by another platform's LB pod through the tunnel to
      // this pod (controller/handover.ts), arrive addressed to the broadcast MAC: taken as this
      // pod's own, they are then served like any other.
      {
        rule: `iifname "${DSR_LB_DEVICE}" meta pkttype set host`,
        listed: `iifname "${DSR_LB_DEVICE}" meta pkttype set 0`,
      },
      ...TCP_FLOW_ENDS,
      ...(["tcp", "udp"] as const).map((p) => ({
        rule: flowHit(p, flowKey("th"), true),
        listed: flowHit(p, flowKey(p), false),
      })),
      { rule: DSR_DISPATCH, listed: DSR_DISPATCH },
    ],
  },
  // DSR: the tunnel's own packets, which leave this pod and never come back. Each connection hashes
  // to its own VXLAN source port: tracked, every new connection would leave an unreplied entry here
  // for 30 s, and at high connection rates fill the table (which then drops every packet).
  {
    name: "tunnel",
    type: "filter",
    hook: "output",
    priority: -300,
    rules: [{ rule: TUNNEL_NOTRACK, listed: TUNNEL_NOTRACK }],
  },
] as const;

export type BaseChain = (typeof BASE_CHAINS)[number];

/** A dispatch map's declaration as `nft list` prints it, line by line. */
export const SERVICES_MAP_LISTED = ["type ipv4_addr . inet_proto . inet_service : verdict", "counter"];
/** A flow table's declaration as `nft list` prints it, line by line. */
export const FLOW_MAP_LISTED = [
  "type ipv4_addr . inet_service . ipv4_addr . inet_service : mark",
  `size ${FLOW_TABLE_SIZE}`,
  "flags dynamic,timeout",
  `timeout ${FLOW_TIMEOUT_S}s`,
];

/** The dispatch map that sends a service's flows to its chain. */
export function dispatchMap(s: Pick<NftService, "forwarding">): "services" | "dsr_services" {
  return s.forwarding === "dsr" ? "dsr_services" : "services";
}

/** A base chain's header as `nft -n list` prints it. */
export function baseChainListed(c: BaseChain): string {
  return `type ${c.type} hook ${c.hook} priority ${c.priority}; policy accept;`;
}

/** The table, its hooks, the dispatch maps and the flow tables. Created once; services come and go inside it. */
export function skeleton(): string {
  const dispatch = "{ type ipv4_addr . inet_proto . inet_service : verdict ; counter ; }";
  return lines([
    `add table ${T}`,
    // Every element counts the packets that match it; the maps are reached only by the first packet
    // of a connection (NAT hooks; DSR: a flow new to this pod), so these are connections per service.
    // Listing this one map is cheap, unlike counters in rules (nft would load every backend table).
    `add map ${T} services ${dispatch}`,
    `add map ${T} dsr_services ${dispatch}`,
    ...(["tcp", "udp"] as const).map(
      (p) =>
        `add map ${T} flows_${p} { type ipv4_addr . inet_service . ipv4_addr . inet_service : mark ; ` +
        `size ${FLOW_TABLE_SIZE} ; flags dynamic, timeout ; timeout ${FLOW_TIMEOUT_S}s ; }`,
    ),
    ...BASE_CHAINS.flatMap((c) => [
      `add chain ${T} ${c.name} { type ${c.type} hook ${c.hook} priority ${c.priority} ; policy accept ; }`,
      ...c.rules.map((r) => `add rule ${T} ${c.name} ${r.rule}`),
    ]),
  ]);
}

// The backend table sits in an anonymous map inside the service's rule: a named map keyed by a
// jhash result makes `nft list` of nftables 1.0.6 crash, and operators must be able to list.
function rules(s: NftService): string[] {
  const id = objectId(s);
  const head = `add rule ${T} svc_${id}`;
  const hash = (labels: ArrayLike<string>, slots: ArrayLike<number>, key = FLOW_HASH_KEY) => {
    const elements = Array.from(slots, (b, i) => `${i} : ${labels[b]}`).join(", ");
    return `jhash ${key} mod ${slots.length} seed ${FLOW_HASH_SEED} map { ${elements} }`;
  };
  const key = hashKey(s);
  // A handover's relay comes first: a packet of a connection this pod did not see start (the
  // chain is reached only by flows missing from the flow table) goes to the old platform, and is
  // remembered.
  const relay = s.relay && [
    `${head} ${RELAY_MATCH} notrack meta mark set ${hash(
      s.relay,
      Array.from(s.relay, (_, i) => i),
    )} ${flowUpdate("tcp", flowKey("th"))} accept`,
  ];
  const serve =
    s.slots.length === 0
      ? `${head} drop`
      : s.forwarding === "dsr"
        ? `${head} meta l4proto ${s.protocol} notrack meta mark set ${hash(s.backends, s.slots, key)} ` +
          flowUpdate(s.protocol, flowKey("th"))
        : `${head} meta l4proto ${s.protocol} dnat ip addr . port to ${hash(s.backends, s.slots, key)}`;
  return [...(relay ?? []), serve];
}

/** What a new flow is hashed on: its client's address and port, or with affinity the address alone. */
const FLOW_HASH_KEY = "ip saddr . th sport";
const hashKey = (s: Pick<NftService, "affinity">) => (s.affinity === "clientIP" ? "ip saddr" : FLOW_HASH_KEY);
/** The hash key as `nft -n` prints it (the port's protocol named). */
const hashKeyListed = (s: Pick<NftService, "protocol" | "affinity">) =>
  s.affinity === "clientIP" ? "ip saddr" : `ip saddr . ${s.protocol} sport`;

/** Packets of a TCP connection whose start (a SYN without ACK) this pod did not see. */
const RELAY_MATCH = "tcp flags & (syn | ack) != syn";

/** A DSR service rule as `nft -n` prints it, up to its lookup table's elements. */
export function dsrRuleListedHead(s: Pick<NftService, "protocol" | "affinity">): string {
  return `meta l4proto ${PROTOCOL_NUMBERS[s.protocol]} notrack meta mark set jhash ${hashKeyListed(s)} mod `;
}
/**
 * A SNAT service rule as `nft -n` prints it, up to its lookup table's size: `meta l4proto` folds
 * into a hash key that names the port (`tcp sport`), and stays where the key is the address alone.
 */
export function snatRuleListedHead(s: Pick<NftService, "protocol" | "affinity">): string {
  const match = s.affinity === "clientIP" ? `meta l4proto ${PROTOCOL_NUMBERS[s.protocol]} ` : "";
  return `${match}dnat ip to jhash ${hashKeyListed(s)} mod `;
}
/** What follows a DSR service rule's lookup table as `nft -n` prints it. */
export function dsrRuleListedTail(protocol: NftService["protocol"]): string {
  return ` } ${flowUpdate(protocol, flowKey(protocol))}`;
}
/** A handover relay rule as `nft -n` prints it, up to its lookup table's elements. */
export const RELAY_RULE_LISTED_HEAD =
  "tcp flags != 0x2 / 0x2,0x10 notrack meta mark set jhash ip saddr . tcp sport mod ";
/** What follows a relay rule's lookup table as `nft -n` prints it. */
export const RELAY_RULE_LISTED_TAIL = ` } ${flowUpdate("tcp", flowKey("tcp"))} accept`;

export function dispatchKey(s: Pick<NftService, "vip" | "protocol" | "port">): string {
  return `${s.vip} . ${s.protocol} . ${s.port}`;
}

/** One service's change: how many statements it holds, and its text, made only when sent. */
export interface ServiceChange {
  /** The service's key (serviceKey). */
  key: string;
  statements: number;
  render: () => string;
}

/**
 * The changes that turn `current` into `desired`, one per changed service (never split between
 * transactions: no packet sees a half-updated service); empty when they are equal. Rendering waits
 * for `batches`: the text of a first sync of 10,000 services is ~60 MB, of which one batch at a
 * time need exist.
 */
export function serviceChanges(current: NftService[], desired: NftService[]): ServiceChange[] {
  const cur = new Map(current.map((s) => [serviceKey(s), s]));
  const want = new Map(desired.map((s) => [serviceKey(s), s]));
  const changes: ServiceChange[] = [];
  for (const [key, s] of cur) {
    if (want.has(key)) continue;
    const id = objectId(s);
    changes.push({
      key,
      statements: 3,
      render: () =>
        lines([
          `delete element ${T} ${dispatchMap(s)} { ${dispatchKey(s)} }`,
          `flush chain ${T} svc_${id}`,
          `delete chain ${T} svc_${id}`,
        ]),
    });
  }
  for (const [key, s] of want) {
    const id = objectId(s);
    const old = cur.get(key);
    if (!old) {
      changes.push({
        key,
        statements: serviceStatements(s),
        render: () =>
          lines([
            `add chain ${T} svc_${id}`,
            ...rules(s),
            `add element ${T} ${dispatchMap(s)} { ${dispatchKey(s)} : goto svc_${id} }`,
          ]),
      });
    } else if (old !== s && old.forwarding !== s.forwarding) {
      // From one dispatch map to the other, in one transaction.
      changes.push({
        key,
        statements: 3 + ruleCount(s),
        render: () =>
          lines([
            `delete element ${T} ${dispatchMap(old)} { ${dispatchKey(s)} }`,
            `flush chain ${T} svc_${id}`,
            ...rules(s),
            `add element ${T} ${dispatchMap(s)} { ${dispatchKey(s)} : goto svc_${id} }`,
          ]),
      });
    } else if (old !== s && !sameTable(old, s)) {
      // The rule is swapped inside one transaction: no packet sees a half-updated service.
      changes.push({
        key,
        statements: 1 + ruleCount(s),
        render: () => lines([`flush chain ${T} svc_${id}`, ...rules(s)]),
      });
    }
  }
  return changes;
}

function sameTable(a: NftService, b: NftService): boolean {
  if (a.broken !== undefined || b.broken !== undefined) return false;
  const same = <T>(x: ArrayLike<T>, y: ArrayLike<T>) => {
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
    return true;
  };
  return (
    a.affinity === b.affinity &&
    same(a.backends, b.backends) &&
    same(a.slots, b.slots) &&
    same(a.relay ?? [], b.relay ?? [])
  );
}

const ruleCount = (s: NftService) => (s.relay ? 2 : 1);
/** The statements that make a service from nothing: its chain, its rules and its dispatch element. */
export const serviceStatements = (s: NftService) => 2 + ruleCount(s);

/** The whole change as one script (what a small change is sent as). */
export function transaction(current: NftService[], desired: NftService[]): string {
  return serviceChanges(current, desired)
    .map((c) => c.render())
    .join("");
}

/**
 * Services per `nft -f` transaction. nft 1.0.6 needs ~3.5 GB to parse 10,000 services with their
 * lookup tables in one transaction (and fails under the pod's limit); 200 stay near 70 MB. Every
 * change an EndpointSlice makes is far smaller, so steady-state changes stay one transaction;
 * only a first start or adoption of thousands of services is split.
 */
export const SERVICES_PER_TRANSACTION = 200;

/** The scripts to send in order, each rendered when the one before it is done. */
export function* batches(changes: ServiceChange[], perBatch = SERVICES_PER_TRANSACTION): Generator<string> {
  for (let i = 0; i < changes.length; i += perBatch) {
    yield changes
      .slice(i, i + perBatch)
      .map((c) => c.render())
      .join("");
  }
}

/**
 * The table replaced whole: deleted (the `add` first makes the delete valid when it is gone) and
 * made again with every service, in one transaction when it fits in one batch; else the first
 * transaction carries the first batch and the rest follow, as a first start's would.
 */
export function* rebuild(desired: NftService[], perBatch = SERVICES_PER_TRANSACTION): Generator<string> {
  const head = lines([`add table ${T}`, `delete table ${T}`]) + skeleton();
  let first = true;
  for (const script of batches(serviceChanges([], desired), perBatch)) {
    yield first ? head + script : script;
    first = false;
  }
  if (first) yield head;
}
