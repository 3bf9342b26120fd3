// The strict reader against nft 1.0.6's own output (captured from `nft -a -n -s list table`): our
// table reads as services with no drift; anything else in it is drift, never an exception. The
// kernel round trip of every state is in nftKernel.test.ts.
import { parseNftText } from "./nftParse.ts";

const TABLE = `table ip portable_lb { # handle 2
	map services { # handle 1
		type ipv4_addr . inet_proto . inet_service : verdict
		counter
		elements = { 10.0.0.2 . 17 . 53 counter packets 0 bytes 0 : goto svc_udp_0a000002_53,
			     10.0.0.1 . 6 . 80 counter packets 12 bytes 720 : goto svc_tcp_0a000001_80 }
	}

	map dsr_services { # handle 20
		type ipv4_addr . inet_proto . inet_service : verdict
		counter
		elements = { 10.0.0.3 . 6 . 443 counter packets 4 bytes 240 : goto svc_tcp_0a000003_443 }
	}

	map flows_tcp { # handle 21
		type ipv4_addr . inet_service . ipv4_addr . inet_service : mark
		size 262144
		flags dynamic,timeout
		timeout 300s
		elements = { 10.0.0.9 . 40000 . 10.0.0.3 . 443 expires 4m59s : 0x0a010001,
			     10.0.0.9 . 40002 . 10.0.0.3 . 443 expires 4m58s : 0x0a010002 }
	}

	map flows_udp { # handle 22
		type ipv4_addr . inet_service . ipv4_addr . inet_service : mark
		size 262144
		flags dynamic,timeout
		timeout 300s
	}

	chain prerouting { # handle 2
		type nat hook prerouting priority -100; policy accept;
		ip daddr . meta l4proto . th dport vmap @services # handle 3
	}

	chain output { # handle 4
		type nat hook output priority -100; policy accept;
		ip daddr . meta l4proto . th dport vmap @services # handle 5
	}

	chain postrouting { # handle 6
		type nat hook postrouting priority 100; policy accept;
		ct status 0x20 masquerade # handle 7
	}

	chain dsr { # handle 23
		type filter hook prerouting priority -300; policy accept;
		iifname "plb-dsr" meta pkttype set 0 # handle 39
		tcp flags 0x2 / 0x2,0x10 delete @flows_tcp { ip saddr . tcp sport . ip daddr . tcp dport : meta mark } # handle 40
		tcp flags 0x1,0x4 meta mark set ip saddr . tcp sport . ip daddr . tcp dport map @flows_tcp fib daddr . mark oifname "plb-dsr" notrack delete @flows_tcp { ip saddr . tcp sport . ip daddr . tcp dport : meta mark } accept # handle 41
		meta mark set ip saddr . tcp sport . ip daddr . tcp dport map @flows_tcp fib daddr . mark oifname "plb-dsr" notrack update @flows_tcp { ip saddr . tcp sport . ip daddr . tcp dport : meta mark } accept # handle 24
		meta mark set ip saddr . udp sport . ip daddr . udp dport map @flows_udp fib daddr . mark oifname "plb-dsr" notrack update @flows_udp { ip saddr . udp sport . ip daddr . udp dport : meta mark } accept # handle 25
		ip daddr . meta l4proto . th dport vmap @dsr_services # handle 26
	}

	chain tunnel { # handle 50
		type filter hook output priority -300; policy accept;
		udp dport 4789 notrack # handle 51
	}

	chain svc_tcp_0a000003_443 { # handle 27
		meta l4proto 6 notrack meta mark set jhash ip saddr . tcp sport mod 3 seed 0x706c62 map { 0 : 0x0a010001, 1 : 0x0a010002, 2 : 0x0a010001 } update @flows_tcp { ip saddr . tcp sport . ip daddr . tcp dport : meta mark } # handle 28
	}

	chain svc_tcp_0a000001_80 { # handle 8
		dnat ip to jhash ip saddr . tcp sport mod 3 seed 0x706c62 map { 2 : 10.1.0.1 . 8080, 0 : 10.1.0.1 . 8080, 1 : 10.1.0.2 . 8080 } # handle 10
	}

	chain svc_udp_0a000002_53 { # handle 11
		drop # handle 12
	}
}
`;

const read = (text: string) => parseNftText(text).result();
/** The text without the object whose first line starts with `head` (up to its closing line). */
const without = (text: string, head: string) => {
  const start = text.indexOf(`\t${head}`);
  const end = text.indexOf("\n\t}\n", start) + "\n\t}\n".length;
  return text.slice(0, start) + text.slice(end).replace(/^\n/, "");
};
const kinds = (text: string) => read(text).drift.map((d) => [d.kind, d.rebuild]);
/** The table without its DSR service (element and chain). */
const snatOnly = without(
  TABLE.replace(/\t\telements = \{ 10\.0\.0\.3[^}]*\}\n/, ""),
  "chain svc_tcp_0a000003_443",
);
const DSR_RULE =
  "meta l4proto 6 notrack meta mark set jhash ip saddr . tcp sport mod 3 seed 0x706c62 map { 0 : 0x0a010001, 1 : 0x0a010002, 2 : 0x0a010001 } update @flows_tcp { ip saddr . tcp sport . ip daddr . tcp dport : meta mark }";

describe("nft strict reader", () => {
  it("reads services with their slots in index order, the rule handles and the counters, with no drift", () => {
    const parsed = parseNftText(TABLE);
    expect(parsed.result()).toEqual({
      services: [
        {
          vip: "10.0.0.1",
          protocol: "tcp",
          port: 80,
          forwarding: "snat",
          backends: ["10.1.0.1 . 8080", "10.1.0.2 . 8080"],
          slots: Uint16Array.from([0, 1, 0]),
        },
        {
          vip: "10.0.0.3",
          protocol: "tcp",
          port: 443,
          forwarding: "dsr",
          backends: ["0x0a010001", "0x0a010002"],
          slots: Uint16Array.from([0, 1, 0]),
        },
        {
          vip: "10.0.0.2",
          protocol: "udp",
          port: 53,
          forwarding: "snat",
          backends: [],
          slots: new Uint16Array(),
        },
      ],
      drift: [],
      ruleHandles: new Map([
        ["prerouting", [3]],
        ["output", [5]],
        ["postrouting", [7]],
        ["dsr", [39, 40, 41, 24, 25, 26]],
        ["tunnel", [51]],
        ["svc_tcp_0a000001_80", [10]],
        ["svc_tcp_0a000003_443", [28]],
        ["svc_udp_0a000002_53", [12]],
      ]),
    });
    expect(parsed.counters()).toEqual([
      { vip: "10.0.0.2", protocol: "udp", port: 53, connections: 0 },
      { vip: "10.0.0.1", protocol: "tcp", port: 80, connections: 12 },
      { vip: "10.0.0.3", protocol: "tcp", port: 443, connections: 4 },
    ]);
  });

  it("reads a ClientIP service back as such, in both forwardings (a hash of the address alone)", () => {
    // As nft 1.0.6 lists them: with the address alone, `meta l4proto` stays before the SNAT rule.
    const sticky = TABLE.replace(
      "dnat ip to jhash ip saddr . tcp sport mod 3",
      "meta l4proto 6 dnat ip to jhash ip saddr mod 3",
    ).replace(
      "notrack meta mark set jhash ip saddr . tcp sport mod 3",
      "notrack meta mark set jhash ip saddr mod 3",
    );
    const affinities = (text: string) => read(text).services.map((s) => [s.vip, s.affinity]);
    expect(read(sticky).drift).toEqual([]);
    expect(affinities(sticky)).toEqual([
      ["10.0.0.1", "clientIP"],
      ["10.0.0.3", "clientIP"],
      ["10.0.0.2", undefined],
    ]);
    expect(affinities(TABLE)).toEqual([
      ["10.0.0.1", undefined],
      ["10.0.0.3", undefined],
      ["10.0.0.2", undefined],
    ]);
  });

  it("reads an empty table and a one-line element list", () => {
    const empty = without(
      without(snatOnly.replace(/\t\telements = \{[^}]*\}\n/g, ""), "chain svc_tcp"),
      "chain svc_udp",
    );
    expect(read(empty)).toEqual({ services: [], drift: [], ruleHandles: expect.any(Map) });
    const one = snatOnly.replace(
      /elements = \{[^}]*\}/,
      "elements = { 10.0.0.2 . udp . 53 : goto svc_udp_0a000002_53 }",
    );
    expect(read(without(one, "chain svc_tcp"))).toMatchObject({
      services: [{ vip: "10.0.0.2", protocol: "udp", port: 53, backends: [], slots: new Uint16Array() }],
      drift: [],
    });
  });

  // Each case: what is wrong, the text, and the drift kinds with whether only a rebuild repairs them.
  it.each([
    [
      "a flushed table (no rules at all)",
      TABLE.replace(/\n\t\t[^\n]*# handle (3|5|7|10|12|24|25|26|28|40|41|51)\b/g, ""),
      [
        ["base", true],
        ["base", true],
        ["base", true],
        ["base", true],
        ["base", true],
        ["service", false],
        ["service", false],
        ["service", false],
      ],
    ],
    ["no masquerade", TABLE.replace(/\n\t\tct status[^\n]*/, ""), [["base", true]]],
    [
      "a foreign rule in a base chain",
      TABLE.replace("\t\tip daddr", "\t\ttcp dport 22 accept # handle 20\n\t\tip daddr"),
      [["foreign", true]],
    ],
    [
      "a changed policy",
      TABLE.replace("priority 100; policy accept;", "priority 100; policy drop;"),
      [["base", true]],
    ],
    [
      "a foreign rule in a service chain",
      TABLE.replace("\t\tdrop # handle 12", "\t\tdrop # handle 12\n\t\taccept # handle 21"),
      [["service", false]],
    ],
    ["a service chain without its rule", TABLE.replace("\t\tdrop # handle 12\n", ""), [["service", false]]],
    [
      "a rule that is not ours",
      TABLE.replace("drop # handle 12", "accept # handle 12"),
      [["service", false]],
    ],
    ["a table with a gap", TABLE.replace("0 : 10.1.0.1 . 8080, ", ""), [["service", false]]],
    ["another seed", TABLE.replace("seed 0x706c62", "seed 0x1"), [["service", false]]],
    [
      "a foreign chain",
      TABLE.replace(
        "\tchain output",
        "\tchain mine { # handle 30\n\t\taccept # handle 31\n\t}\n\n\tchain output",
      ),
      [["foreign", true]],
    ],
    [
      "a foreign set",
      TABLE.replace(
        "\tchain output",
        "\tset s { # handle 30\n\t\ttype ipv4_addr\n\t\telements = { 1.2.3.4,\n\t\t\t     5.6.7.8 }\n\t}\n\n\tchain output",
      ),
      [["foreign", true]],
    ],
    [
      "a foreign element",
      TABLE.replace("elements = {", "elements = { 10.9.9.9 . 6 . 22 : accept,"),
      [["foreign", true]],
    ],
    [
      "an element going to another chain",
      TABLE.replace(": goto svc_udp_0a000002_53", ": goto svc_tcp_0a000001_80"),
      [
        ["foreign", true],
        ["foreign", true],
      ],
    ],
    ["a changed map", TABLE.replace("\t\tcounter\n", "\t\tflags interval\n\t\tcounter\n"), [["base", true]]],
    [
      "no map",
      without(TABLE, "map services"),
      [
        ["base", true],
        ["foreign", true],
        ["foreign", true],
      ],
    ],
    [
      "a port printed as a name",
      TABLE.replace(". 6 . 80", '. 6 . "http"'),
      [
        ["foreign", true],
        ["foreign", true],
      ],
    ],
    [
      "garbage",
      "Error: something else\n",
      [
        ["unparseable", true],
        ["unparseable", true],
        ...Array.from({ length: 9 }, () => ["base", true]), // 4 maps, 5 base chains
      ],
    ],
    [
      "a DSR service whose chain rewrites the destination",
      TABLE.replace(
        DSR_RULE,
        "dnat ip to jhash ip saddr . tcp sport mod 1 seed 0x706c62 map { 0 : 10.1.0.1 . 443 }",
      ),
      [["service", false]],
    ],
    [
      "a DSR rule that no longer remembers flows",
      TABLE.replace(DSR_RULE, DSR_RULE.replace(/ update .*/, "")),
      [["service", false]],
    ],
    ["a changed flow table", TABLE.replace("timeout 300s", "timeout 60s"), [["base", true]]],
    [
      "the DSR rules out of order",
      TABLE.replace(
        /(\t\tmeta mark set ip saddr \. tcp[^\n]*\n)(\t\tmeta mark set ip saddr \. udp[^\n]*\n)/,
        "$2$1",
      ),
      [
        ["foreign", true],
        ["foreign", true],
        ["base", true],
      ],
    ],
  ])("reports %s as drift", (_what, text, expected) => {
    expect(kinds(text)).toEqual(expected);
  });
});
