// The test's sender: a stand-in for the LB side of DSR (lb-image/src/dataplane/dsr), which will
// replace it. It encapsulates VIP traffic arriving from outside to one backend pod with the tunnel
// contract's constants: a mark per backend, an ip rule from that mark to the backend's table, and
// there one route that encapsulates (lwt, VNI, pod IP) over the external VXLAN device to a
// permanent neighbour with the backend's fixed MAC. Kept small on purpose: it proves the backend
// side, not the LB's choice of backend.
import {
  DSR_BACKEND_MAC,
  DSR_DEVICE,
  DSR_LB_MAC,
  DSR_NEXT_HOP,
  DSR_UDP_PORT,
  DSR_VNI,
  backendMark,
} from "../../../lb-image/src/dataplane/dsr/dsrTunnel.ts";
import type { LabNamespace } from "@portable-lb/lab";

export const SENDER_TABLE = "dsr_test_sender";

/** Sends traffic to `vips` arriving on `uplink` to the backend pod `podIp`, encapsulated. */
export async function startDsrTestSender(
  ns: LabNamespace,
  o: { uplink: string; vips: string[]; podIp: string },
): Promise<void> {
  const mark = String(backendMark(o.podIp));
  await ns.ip("link", "add", DSR_DEVICE, "type", "vxlan", "external", "dstport", String(DSR_UDP_PORT));
  await ns.ip("link", "set", DSR_DEVICE, "address", DSR_LB_MAC, "up");
  await ns.ip("neigh", "add", DSR_NEXT_HOP, "lladdr", DSR_BACKEND_MAC, "dev", DSR_DEVICE, "nud", "permanent");
  await ns.ip(
    ..."route add default via".split(" "),
    DSR_NEXT_HOP,
    ..."dev plb-dsr onlink encap ip id".split(" "),
    String(DSR_VNI),
    "dst",
    o.podIp,
    "table",
    mark,
  );
  // `iif`: the encapsulated packet (sent from this namespace, iif lo) keeps the mark and must not
  // match again.
  await ns.ip("rule", "add", "iif", o.uplink, "fwmark", mark, "table", mark);
  const vips = `{ ${o.vips.join(", ")} }`;
  await ns.run("nft", ["-f", "-"], {
    input: [
      `table ip ${SENDER_TABLE} {`,
      `  chain pre { type filter hook prerouting priority mangle; policy accept;`,
      `    ip daddr ${vips} counter meta mark set ${mark}`,
      // Replies must never come this way (they go from the backend straight to the client).
      `    ip saddr ${vips} counter`,
      `  }`,
      `}`,
    ].join("\n"),
  });
}

/** Packets the sender encapsulated, and packets from a VIP that reached it (DSR: none). */
export async function senderCounters(ns: LabNamespace): Promise<{ encapsulated: number; replies: number }> {
  const [encapsulated = -1, replies = -1] = await ruleCounters(ns, SENDER_TABLE);
  return { encapsulated, replies };
}

/** The packet counts of a table's rules with a counter, in rule order. */
export async function ruleCounters(ns: LabNamespace, table: string): Promise<number[]> {
  const listing = JSON.parse(await ns.run("nft", ["-j", "list", "table", "ip", table])) as {
    nftables: { rule?: { expr: { counter?: { packets: number } }[] } }[];
  };
  return listing.nftables.flatMap(
    (o) => o.rule?.expr.flatMap((e) => (e.counter ? [e.counter.packets] : [])) ?? [],
  );
}
