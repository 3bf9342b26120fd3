// Reading `nft -j list table` back, for the small tables the controller writes whole and reads
// strictly (ipvs/ipvsSnat.ts, firewall/firewallTable.ts).
import { serviceKey } from "./model.ts";

/** The listed objects of one kind ("set", "chain", "rule"...); undefined when the output is not JSON. */
export function nftObjects(json: string): ((kind: string) => Record<string, unknown>[]) | undefined {
  let items: Record<string, unknown>[];
  try {
    items = (JSON.parse(json) as { nftables: Record<string, unknown>[] }).nftables;
  } catch {
    return undefined;
  }
  return (kind) => items.flatMap((i) => (kind in i ? [i[kind] as Record<string, unknown>] : []));
}

/** The service key of an `address . protocol . port` element's parts (nft names protocols, or numbers them). */
export function elementServiceKey(parts: unknown[] | undefined): string | undefined {
  const protocol =
    parts?.[1] === 6 || parts?.[1] === "tcp"
      ? "tcp"
      : parts?.[1] === 17 || parts?.[1] === "udp"
        ? "udp"
        : undefined;
  if (!parts || typeof parts[0] !== "string" || typeof parts[2] !== "number" || !protocol) return undefined;
  return serviceKey({ protocol, vip: parts[0], port: parts[2] });
}

/** Equal as nft -j prints them (the same keys in the same order). */
export function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
