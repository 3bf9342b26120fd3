// Reads the engine's state back from `nft -j list table ip portable_lb`.
import type { VipCounter } from "../model.ts";
import { parseCounterName, sortNft, type NftService } from "./nftState.ts";

interface NftJson {
  nftables: Record<string, unknown>[];
}
type Concat = { concat: (string | number)[] };
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

/** The services in the table, or [] when the table holds none. */
export function parseNftTable(json: string): NftService[] {
  const doc = JSON.parse(json) as NftJson;
  const rules = doc.nftables
    .map((i) => i["rule"] as Rule | undefined)
    .filter((r): r is Rule => r !== undefined);
  const services = doc.nftables
    .map((i) => i["map"] as { name: string; elem?: unknown[] } | undefined)
    .find((m) => m?.name === "services");
  return sortNft(
    (services?.elem ?? []).map((entry) => {
      const [key, verdict] = entry as [Concat, { goto?: { target: string } }];
      const [vip, protocol, port] = key.concat as [string, string, number];
      const chain = verdict.goto?.target;
      if (!chain?.startsWith("svc_") || (protocol !== "tcp" && protocol !== "udp")) {
        throw new NftParseError(`nft: unexpected services entry ${JSON.stringify(entry)}`);
      }
      return { protocol, vip, port, slots: slotsOf(rules, chain) };
    }),
  );
}

/** Connections per service from `nft -j list counters table ip portable_lb`. */
export function parseNftCounters(json: string): VipCounter[] {
  const doc = JSON.parse(json) as NftJson;
  return doc.nftables.flatMap((i) => {
    const c = i["counter"] as { name: string; packets: number } | undefined;
    const service = c && parseCounterName(c.name);
    return service ? [{ ...service, connections: c.packets }] : [];
  });
}
