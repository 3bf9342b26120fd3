// Reads the engine's state back from `nft -j list table ip portable_lb`, and the per-service
// connection counters from `nft -j list map ip portable_lb services`.
import type { VipCounter } from "../model.ts";
import { sortNft, type NftService } from "./nftState.ts";

interface NftJson {
  nftables: Record<string, unknown>[];
}
type Concat = { concat: (string | number)[] };
/** A dispatch-map key: plain, or wrapped with its counter ({ elem: { val, counter } }). */
type Key = Concat | { elem: { val: Concat; counter?: { packets: number } } };
interface Rule {
  chain: string;
  expr: Record<string, unknown>[];
}

export class NftParseError extends Error {}

function slotsOf(rules: Rule[], chain: string): string[] {
  const rule = rules.find((r) => r.chain === chain);
  if (!rule) throw new NftParseError(`nft: chain ${chain} has no rule`);
  if (rule.expr.some((e) => "drop" in e)) return [];
  const dnat = rule.expr.find((e) => "dnat" in e)?.["dnat"] as
    { addr?: { map?: { data?: { set?: unknown[] } } } } | undefined;
  const set = dnat?.addr?.map?.data?.set;
  if (!set) throw new NftParseError(`nft: chain ${chain} does not hold a portable-lb backend map`);
  return set
    .map((e) => e as [number, Concat])
    .sort((a, b) => a[0] - b[0])
    .map(([, backend]) => `${backend.concat[0]} . ${backend.concat[1]}`);
}

interface DispatchEntry {
  service: Pick<NftService, "protocol" | "vip" | "port">;
  chain: string | undefined;
  connections: number;
}

/** The `services` dispatch map's entries in an nft JSON document. */
function dispatchEntries(doc: NftJson): DispatchEntry[] {
  const services = doc.nftables
    .map((i) => i["map"] as { name: string; elem?: unknown[] } | undefined)
    .find((m) => m?.name === "services");
  return (services?.elem ?? []).map((entry) => {
    const [key, verdict] = entry as [Key, { goto?: { target: string } }];
    const concat = "elem" in key ? key.elem.val : key;
    const [vip, protocol, port] = concat.concat as [string, string, number];
    if (protocol !== "tcp" && protocol !== "udp") {
      throw new NftParseError(`nft: unexpected services entry ${JSON.stringify(entry)}`);
    }
    return {
      service: { protocol, vip, port },
      chain: verdict.goto?.target,
      connections: "elem" in key ? (key.elem.counter?.packets ?? 0) : 0,
    };
  });
}

/** The services in the table, or [] when the table holds none. */
export function parseNftTable(json: string): NftService[] {
  const doc = JSON.parse(json) as NftJson;
  const rules = doc.nftables
    .map((i) => i["rule"] as Rule | undefined)
    .filter((r): r is Rule => r !== undefined);
  return sortNft(
    dispatchEntries(doc).map(({ service, chain }) => {
      if (!chain?.startsWith("svc_")) {
        throw new NftParseError(
          `nft: services entry ${JSON.stringify(service)} does not go to a service chain`,
        );
      }
      return { ...service, slots: slotsOf(rules, chain) };
    }),
  );
}

/** Connections per service: the dispatch map's element counters. */
export function parseNftCounters(json: string): VipCounter[] {
  return dispatchEntries(JSON.parse(json) as NftJson).map((e) => ({
    ...e.service,
    connections: e.connections,
  }));
}
