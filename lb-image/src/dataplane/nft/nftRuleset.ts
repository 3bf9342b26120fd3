// nft scripts for the nftables engine: the table skeleton, and one transaction per change that
// touches only the services that changed. `nft -f` applies a script atomically: all or nothing.
import { serviceKey } from "../model.ts";
import { NFT_TABLE, objectId, type NftService } from "./nftState.ts";

const T = `ip ${NFT_TABLE}`;
/** Fixed hash seed: every LB pod must hash a flow the same way to pick the same backend. */
export const FLOW_HASH_SEED = "0x706c62";

/** The table, its hooks and the VIP dispatch map. Created once; services come and go inside it. */
export function skeleton(): string {
  const dispatch = "ip daddr . meta l4proto . th dport vmap @services";
  return [
    `add table ${T}`,
    // Every element counts the packets that match it; the map sits in NAT hooks, which see only
    // the first packet of a connection, so these are connections per service. Listing this one
    // map is cheap, unlike counters in rules (nft would load every backend table to list those).
    `add map ${T} services { type ipv4_addr . inet_proto . inet_service : verdict ; counter ; }`,
    `add chain ${T} prerouting { type nat hook prerouting priority dstnat ; policy accept ; }`,
    `add rule ${T} prerouting ${dispatch}`,
    // Traffic that starts inside the LB pod (health checks, tests) takes the same path.
    `add chain ${T} output { type nat hook output priority -100 ; policy accept ; }`,
    `add rule ${T} output ${dispatch}`,
    // SNAT toward backends, so replies come back through this LB pod (paper's setup).
    `add chain ${T} postrouting { type nat hook postrouting priority srcnat ; policy accept ; }`,
    `add rule ${T} postrouting ct status dnat masquerade`,
  ]
    .map((l) => `${l}\n`)
    .join("");
}

// The backend table sits in an anonymous map inside the service's one rule: a named map keyed by
// a jhash result makes `nft list` of nftables 1.0.6 crash, and operators must be able to list.
function rule(s: NftService): string {
  const id = objectId(s);
  const head = `add rule ${T} svc_${id}`;
  if (s.slots.length === 0) return `${head} drop`;
  const elements = s.slots.map((backend, i) => `${i} : ${backend}`).join(", ");
  return (
    `${head} meta l4proto ${s.protocol} dnat ip addr . port to ` +
    `jhash ip saddr . th sport mod ${s.slots.length} seed ${FLOW_HASH_SEED} map { ${elements} }`
  );
}

function dispatchKey(s: NftService): string {
  return `${s.vip} . ${s.protocol} . ${s.port}`;
}

/**
 * The commands that turn `current` into `desired`, one group per changed service (a group is never
 * split between transactions: no packet sees a half-updated service); empty when they are equal.
 */
export function transactionGroups(current: NftService[], desired: NftService[]): string[] {
  const cur = new Map(current.map((s) => [serviceKey(s), s]));
  const want = new Map(desired.map((s) => [serviceKey(s), s]));
  const groups: string[][] = [];
  for (const [key, s] of cur) {
    if (want.has(key)) continue;
    const id = objectId(s);
    groups.push([
      `delete element ${T} services { ${dispatchKey(s)} }`,
      `flush chain ${T} svc_${id}`,
      `delete chain ${T} svc_${id}`,
    ]);
  }
  for (const [key, s] of want) {
    const id = objectId(s);
    const old = cur.get(key);
    if (!old) {
      groups.push([
        `add chain ${T} svc_${id}`,
        rule(s),
        `add element ${T} services { ${dispatchKey(s)} : goto svc_${id} }`,
      ]);
    } else if (old !== s && old.slots.join(",") !== s.slots.join(",")) {
      // The rule is swapped inside one transaction: no packet sees a half-updated service.
      groups.push([`flush chain ${T} svc_${id}`, rule(s)]);
    }
  }
  return groups.map((g) => g.map((l) => `${l}\n`).join(""));
}

/** The whole change as one script (what a small change is sent as). */
export function transaction(current: NftService[], desired: NftService[]): string {
  return transactionGroups(current, desired).join("");
}

/**
 * Services per `nft -f` transaction. nft 1.0.6 needs ~3.5 GB to parse 10,000 services with their
 * lookup tables in one transaction (and fails under the pod's limit); 200 stay near 70 MB. Every
 * change an EndpointSlice makes is far smaller, so steady-state changes stay one transaction;
 * only a first start or adoption of thousands of services is split.
 */
export const SERVICES_PER_TRANSACTION = 200;

export function batches(groups: string[], perBatch = SERVICES_PER_TRANSACTION): string[] {
  const out: string[] = [];
  for (let i = 0; i < groups.length; i += perBatch) out.push(groups.slice(i, i + perBatch).join(""));
  return out;
}
