// Reads the packet counts a test's own nft tables keep (observation rules, a drop's counter).
import type { LabNamespace } from "@portable-lb/lab";

/** The packet counts of a table's rules with a counter, in rule order. */
export async function ruleCounters(ns: LabNamespace, table: string): Promise<number[]> {
  const listing = JSON.parse(await ns.run("nft", ["-j", "list", "table", "ip", table])) as {
    nftables: { rule?: { expr: { counter?: { packets: number } }[] } }[];
  };
  return listing.nftables.flatMap(
    (o) => o.rule?.expr.flatMap((e) => (e.counter ? [e.counter.packets] : [])) ?? [],
  );
}
