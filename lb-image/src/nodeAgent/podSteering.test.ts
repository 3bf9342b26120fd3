import { BFD_MULTIHOP_PORT, desiredSteering, parseSteering, steeringScript } from "./podSteering.ts";

const listing = (rules: Record<string, object[]>) =>
  JSON.stringify({
    nftables: [
      { metainfo: { version: "1.0.6" } },
      { table: { family: "ip", name: "portable_lb_node" } },
      ...Object.entries(rules).map(([chain, expr]) => ({
        rule: { family: "ip", table: "portable_lb_node", chain, expr },
      })),
    ],
  });
const rule = (saddr: unknown, podIp: string, port = BFD_MULTIHOP_PORT) => [
  { match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: saddr } },
  { match: { op: "==", left: { payload: { protocol: "udp", field: "dport" } }, right: port } },
  { notrack: null },
  { mangle: { key: { payload: { protocol: "ip", field: "daddr" } }, value: podIp } },
];
const none = { reflectors: [], handoverPeers: [] };

describe("pod steering", () => {
  it("steers the reflectors' multihop BFD to the pod before connection tracking, or removes its table", () => {
    expect(
      steeringScript(
        desiredSteering({ ...none, reflectors: ["10.0.0.6", "10.0.0.5"], podIp: "10.244.1.10" }),
      ),
    ).toBe(`add table ip portable_lb_node
delete table ip portable_lb_node
add table ip portable_lb_node
add chain ip portable_lb_node bfd { type filter hook prerouting priority raw ; policy accept ; }
add rule ip portable_lb_node bfd ip saddr { 10.0.0.5, 10.0.0.6 } udp dport 4784 notrack ip daddr set 10.244.1.10
`);
    expect(desiredSteering({ ...none, reflectors: ["10.0.0.5"], podIp: undefined })).toBeUndefined();
    expect(desiredSteering({ ...none, podIp: "10.244.1.10" })).toBeUndefined();
    expect(steeringScript(undefined)).toBe(
      "add table ip portable_lb_node\ndelete table ip portable_lb_node\n",
    );
  });

  it("steers another platform's relayed flows (the DSR tunnel's port) to the pod too", () => {
    const s = desiredSteering({
      podIp: "10.244.1.10",
      reflectors: [],
      handoverPeers: ["192.168.101.12", "192.168.101.11"],
    });
    expect(steeringScript(s)).toContain(
      "add rule ip portable_lb_node handover ip saddr { 192.168.101.11, 192.168.101.12 } udp dport 4789 notrack ip daddr set 10.244.1.10\n",
    );
    expect(steeringScript(s)).not.toContain(" bfd ");
  });

  it("reads back exactly its own rules, one source or several; anything else is to be replaced", () => {
    expect(parseSteering(listing({ bfd: rule({ set: ["10.0.0.6", "10.0.0.5"] }, "10.244.1.10") }))).toEqual({
      ...none,
      reflectors: ["10.0.0.5", "10.0.0.6"],
      podIp: "10.244.1.10",
    });
    // nft prints a one-element set as the address itself.
    expect(
      parseSteering(
        listing({
          bfd: rule("10.0.0.5", "10.244.1.10"),
          handover: rule("192.168.101.11", "10.244.1.10", 4789),
        }),
      ),
    ).toEqual({ reflectors: ["10.0.0.5"], handoverPeers: ["192.168.101.11"], podIp: "10.244.1.10" });
    expect(parseSteering(listing({}))).toBe("other");
    expect(parseSteering(listing({ bfd: rule("10.0.0.5", "10.244.1.10", 3784) }))).toBe("other");
    expect(parseSteering(listing({ handover: rule("10.0.0.5", "10.244.1.10") }))).toBe("other");
    // Two pods: the table is not one this agent made.
    expect(
      parseSteering(
        listing({
          bfd: rule("10.0.0.5", "10.244.1.10"),
          handover: rule("192.168.101.11", "10.244.1.11", 4789),
        }),
      ),
    ).toBe("other");
    expect(parseSteering(listing({ bfd: [{ drop: null }] }))).toBe("other");
  });
});
