// nft scripts for the nftables engine: the table skeleton, and one transaction per change that
// touches only the services that changed. `nft -f` applies a script atomically: all or nothing.
import { serviceKey } from "../model.ts";
import { NFT_TABLE, objectId, type NftService } from "./nftState.ts";

const T = `ip ${NFT_TABLE}`;
const lines = (statements: string[]) => statements.map((l) => `${l}\n`).join("");
/** Fixed hash seed: every LB pod must hash a flow the same way to pick the same backend. */
export const FLOW_HASH_SEED = "0x706c62";

const DISPATCH = "ip daddr . meta l4proto . th dport vmap @services";

/**
 * The table's frame: its base chains (NAT hooks, policy accept) and the one rule each holds, as
 * written and as `nft -n list` prints it back (the strict reader expects exactly this).
 */
export const BASE_CHAINS = [
  { name: "prerouting", hook: "prerouting", priority: -100, rule: DISPATCH, listed: DISPATCH },
  // Traffic that starts inside the LB pod (health checks, tests) takes the same path.
  { name: "output", hook: "output", priority: -100, rule: DISPATCH, listed: DISPATCH },
  // SNAT toward backends, so replies come back through this LB pod (paper's setup).
  {
    name: "postrouting",
    hook: "postrouting",
    priority: 100,
    rule: "ct status dnat masquerade",
    listed: "ct status 0x20 masquerade",
  },
] as const;

/** The dispatch map's declaration as `nft list` prints it, line by line. */
export const SERVICES_MAP_LISTED = ["type ipv4_addr . inet_proto . inet_service : verdict", "counter"];

/** A base chain's header as `nft -n list` prints it. */
export function baseChainListed(c: (typeof BASE_CHAINS)[number]): string {
  return `type nat hook ${c.hook} priority ${c.priority}; policy accept;`;
}

/** The table, its hooks and the VIP dispatch map. Created once; services come and go inside it. */
export function skeleton(): string {
  return lines([
    `add table ${T}`,
    // Every element counts the packets that match it; the map sits in NAT hooks, which see only
    // the first packet of a connection, so these are connections per service. Listing this one
    // map is cheap, unlike counters in rules (nft would load every backend table to list those).
    `add map ${T} services { type ipv4_addr . inet_proto . inet_service : verdict ; counter ; }`,
    ...BASE_CHAINS.flatMap((c) => [
      `add chain ${T} ${c.name} { type nat hook ${c.hook} priority ${c.priority} ; policy accept ; }`,
      `add rule ${T} ${c.name} ${c.rule}`,
    ]),
  ]);
}

// The backend table sits in an anonymous map inside the service's one rule: a named map keyed by
// a jhash result makes `nft list` of nftables 1.0.6 crash, and operators must be able to list.
function rule(s: NftService): string {
  const id = objectId(s);
  const head = `add rule ${T} svc_${id}`;
  if (s.slots.length === 0) return `${head} drop`;
  const elements = Array.from(s.slots, (b, i) => `${i} : ${s.backends[b]}`).join(", ");
  return (
    `${head} meta l4proto ${s.protocol} dnat ip addr . port to ` +
    `jhash ip saddr . th sport mod ${s.slots.length} seed ${FLOW_HASH_SEED} map { ${elements} }`
  );
}

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
          `delete element ${T} services { ${dispatchKey(s)} }`,
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
        statements: 3,
        render: () =>
          lines([
            `add chain ${T} svc_${id}`,
            rule(s),
            `add element ${T} services { ${dispatchKey(s)} : goto svc_${id} }`,
          ]),
      });
    } else if (old !== s && !sameTable(old, s)) {
      // The rule is swapped inside one transaction: no packet sees a half-updated service.
      changes.push({ key, statements: 2, render: () => lines([`flush chain ${T} svc_${id}`, rule(s)]) });
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
  return same(a.backends, b.backends) && same(a.slots, b.slots);
}

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
