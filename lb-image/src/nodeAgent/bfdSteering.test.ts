import { BFD_MULTIHOP_PORT, desiredSteering, parseSteering, steeringScript } from "./bfdSteering.ts";

const listing = (rule: object[] | undefined) =>
  JSON.stringify({
    nftables: [
      { metainfo: { version: "1.0.6" } },
      { table: { family: "ip", name: "portable_lb_node" } },
      ...(rule ? [{ rule: { family: "ip", table: "portable_lb_node", chain: "bfd", expr: rule } }] : []),
    ],
  });
const rule = (saddr: unknown, podIp: string, port = BFD_MULTIHOP_PORT) => [
  { match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: saddr } },
  { match: { op: "==", left: { payload: { protocol: "udp", field: "dport" } }, right: port } },
  { notrack: null },
  { mangle: { key: { payload: { protocol: "ip", field: "daddr" } }, value: podIp } },
];

describe("BFD steering", () => {
  it("steers the reflectors' multihop BFD to the pod before connection tracking, or removes its table", () => {
    expect(steeringScript(desiredSteering({ reflectors: ["10.0.0.6", "10.0.0.5"], podIp: "10.244.1.10" })))
      .toBe(`add table ip portable_lb_node
delete table ip portable_lb_node
add table ip portable_lb_node
add chain ip portable_lb_node bfd { type filter hook prerouting priority raw ; policy accept ; }
add rule ip portable_lb_node bfd ip saddr { 10.0.0.5, 10.0.0.6 } udp dport 4784 notrack ip daddr set 10.244.1.10
`);
    expect(desiredSteering({ reflectors: ["10.0.0.5"], podIp: undefined })).toBeUndefined();
    expect(desiredSteering({ reflectors: [], podIp: "10.244.1.10" })).toBeUndefined();
    expect(steeringScript(undefined)).toBe(
      "add table ip portable_lb_node\ndelete table ip portable_lb_node\n",
    );
  });

  it("reads back exactly its own rule, one reflector or several; anything else is to be replaced", () => {
    expect(parseSteering(listing(rule({ set: ["10.0.0.6", "10.0.0.5"] }, "10.244.1.10")))).toEqual({
      reflectors: ["10.0.0.5", "10.0.0.6"],
      podIp: "10.244.1.10",
    });
    // nft prints a one-element set as the address itself.
    expect(parseSteering(listing(rule("10.0.0.5", "10.244.1.10")))).toEqual({
      reflectors: ["10.0.0.5"],
      podIp: "10.244.1.10",
    });
    expect(parseSteering(listing(undefined))).toBe("other");
    expect(parseSteering(listing(rule("10.0.0.5", "10.244.1.10", 3784)))).toBe("other");
    expect(parseSteering(listing([{ drop: null }]))).toBe("other");
  });
});
