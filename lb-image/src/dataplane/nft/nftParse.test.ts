// The text parser against nft 1.0.6's own output (captured from `nft -n list table`); the kernel
// round trip of every state is in nftKernel.test.ts.
import { NftParseError, parseNftText } from "./nftParse.ts";

const TABLE = `table ip portable_lb {
	map services {
		type ipv4_addr . inet_proto . inet_service : verdict
		counter
		elements = { 10.0.0.2 . 17 . 53 counter packets 0 bytes 0 : goto svc_udp_0a000002_53,
			     10.0.0.1 . 6 . 80 counter packets 12 bytes 720 : goto svc_tcp_0a000001_80 }
	}

	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr . meta l4proto . th dport vmap @services
	}

	chain svc_tcp_0a000001_80 {
		dnat ip to jhash ip saddr . tcp sport mod 3 seed 0x706c62 map { 2 : 10.1.0.1 . 8080, 0 : 10.1.0.1 . 8080, 1 : 10.1.0.2 . 8080 }
	}

	chain svc_udp_0a000002_53 {
		drop
	}
}
`;

describe("nft text parser", () => {
  it("reads services with their slots in index order, and the counters", () => {
    const parsed = parseNftText(TABLE);
    expect(parsed.services()).toEqual([
      {
        vip: "10.0.0.1",
        protocol: "tcp",
        port: 80,
        backends: ["10.1.0.1 . 8080", "10.1.0.2 . 8080"],
        slots: Uint16Array.from([0, 1, 0]),
      },
      { vip: "10.0.0.2", protocol: "udp", port: 53, backends: [], slots: new Uint16Array() },
    ]);
    expect(parsed.counters()).toEqual([
      { vip: "10.0.0.2", protocol: "udp", port: 53, connections: 0 },
      { vip: "10.0.0.1", protocol: "tcp", port: 80, connections: 12 },
    ]);
  });

  it("reads an empty table and a one-line element list", () => {
    expect(parseNftText("table ip portable_lb {\n\tmap services {\n\t}\n}\n").services()).toEqual([]);
    const one = TABLE.replace(
      /elements = \{[^}]*\}/,
      "elements = { 10.0.0.2 . udp . 53 : goto svc_udp_0a000002_53 }",
    );
    expect(parseNftText(one).services()).toEqual([
      { vip: "10.0.0.2", protocol: "udp", port: 53, backends: [], slots: new Uint16Array() },
    ]);
  });

  it.each([
    ["a port printed as a name", TABLE.replace(". 6 . 80", '. 6 . "http"'), /unexpected services element/],
    ["a table with a gap", TABLE.replace("0 : 10.1.0.1 . 8080, ", ""), /gaps/],
    ["a rule that is not ours", TABLE.replace("drop", "accept"), /does not hold a portable-lb backend map/],
    [
      "an entry without its chain",
      TABLE.replace(/chain svc_udp[^}]*\}/, ""),
      /does not go to a service chain/,
    ],
  ])("rejects %s", (_what, text, message) => {
    expect(() => parseNftText(text).services()).toThrow(NftParseError);
    expect(() => parseNftText(text).services()).toThrow(message);
  });
});
