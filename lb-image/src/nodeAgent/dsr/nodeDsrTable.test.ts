import fc from "fast-check";
import { desiredNodeTable, nodeTableChange, nodeTableScript, parseNodeTable } from "./nodeDsrTable.ts";
import { allInterfaces, routeDevice, strictInterfaces } from "./nodeRpFilter.ts";

// `nft -j list table ip portable_lb_dsr` of what nodeTableScript({ vips: [10, 11], mss: 1360 })
// makes, captured from nft 1.0.6 in a throwaway netns; without `mss`, the last chain and rule are absent.
const captured = {
  nftables: [
    { metainfo: { version: "1.0.6", release_name: "Lester Gooch #5", json_schema_version: 1 } },
    { table: { family: "ip", name: "portable_lb_dsr", handle: 2 } },
    {
      set: {
        family: "ip",
        name: "vips",
        table: "portable_lb_dsr",
        type: "ipv4_addr",
        handle: 1,
        elem: ["10.1.1.10", "10.1.1.11"],
      },
    },
    {
      chain: {
        family: "ip",
        table: "portable_lb_dsr",
        name: "forwarded",
        handle: 2,
        type: "filter",
        hook: "prerouting",
        prio: -300,
        policy: "accept",
      },
    },
    {
      chain: {
        family: "ip",
        table: "portable_lb_dsr",
        name: "mss",
        handle: 5,
        type: "filter",
        hook: "forward",
        prio: -150,
        policy: "accept",
      },
    },
    ...(["daddr", "saddr"] as const).map((field, i) => ({
      rule: {
        family: "ip",
        table: "portable_lb_dsr",
        chain: "forwarded",
        handle: 3 + i,
        expr: [
          { match: { op: "==", left: { payload: { protocol: "ip", field } }, right: "@vips" } },
          { match: { op: "!=", left: { fib: { result: "type", flags: ["daddr"] } }, right: "local" } },
          { notrack: null },
        ],
      },
    })),
    {
      rule: {
        family: "ip",
        table: "portable_lb_dsr",
        chain: "forwarded",
        handle: 7,
        expr: [
          { match: { op: "==", left: { payload: { protocol: "udp", field: "dport" } }, right: 4789 } },
          { match: { op: "==", left: { payload: { base: "th", offset: 96, len: 24 } }, right: 7367778 } },
          { notrack: null },
        ],
      },
    },
    {
      rule: {
        family: "ip",
        table: "portable_lb_dsr",
        chain: "mss",
        handle: 6,
        expr: [
          { match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: "@vips" } },
          {
            match: {
              op: "==",
              left: { "&": [{ payload: { protocol: "tcp", field: "flags" } }, ["syn", "ack"]] },
              right: ["syn", "ack"],
            },
          },
          { match: { op: ">", left: { "tcp option": { name: "maxseg", field: "size" } }, right: 1360 } },
          { mangle: { key: { "tcp option": { name: "maxseg", field: "size" } }, value: 1360 } },
        ],
      },
    },
  ],
};

type Listed = (typeof captured.nftables)[number] & Record<string, unknown>;
/** The captured listing, changed by `edit` (a copy of each object; returning undefined drops it). */
const listing = (edit: (o: Listed) => Listed | undefined = (o) => o) =>
  JSON.stringify({
    nftables: captured.nftables.flatMap((o) => edit(structuredClone(o) as Listed) ?? []),
  });
const withoutMss = (o: Listed) =>
  (o.chain as { name?: string } | undefined)?.name === "mss" ||
  (o.rule as { chain?: string } | undefined)?.chain === "mss"
    ? undefined
    : o;

describe("node DSR table", () => {
  it("holds every DSR VIP; clamps to the smallest local pod MTU less the tunnel and headers", () => {
    expect(desiredNodeTable(["10.1.1.11", "10.1.1.10"], [1500, 1450])).toEqual({
      vips: ["10.1.1.10", "10.1.1.11"],
      mss: 1360,
    });
    // A node without local DSR backend pods (an LB node) still untracks; it clamps nothing.
    expect(desiredNodeTable(["10.1.1.10"], [])).toEqual({ vips: ["10.1.1.10"] });
    expect(desiredNodeTable([], [1450])).toBeUndefined();
  });

  it("renders one atomic script: notrack to and from a VIP, MSS clamp only with local pods", () => {
    const untrack = [
      "add table ip portable_lb_dsr",
      "delete table ip portable_lb_dsr",
      "add table ip portable_lb_dsr",
      "add set ip portable_lb_dsr vips { type ipv4_addr ; }",
      "add element ip portable_lb_dsr vips { 10.1.1.10 }",
      "add chain ip portable_lb_dsr forwarded { type filter hook prerouting priority raw ; policy accept ; }",
      "add rule ip portable_lb_dsr forwarded ip daddr @vips fib daddr type != local notrack",
      "add rule ip portable_lb_dsr forwarded ip saddr @vips fib daddr type != local notrack",
      "add rule ip portable_lb_dsr forwarded udp dport 4789 @th,96,24 7367778 notrack",
    ];
    expect(nodeTableScript({ vips: ["10.1.1.10"], mss: 1360 })).toBe(
      [
        ...untrack,
        "add chain ip portable_lb_dsr mss { type filter hook forward priority mangle ; policy accept ; }",
        "add rule ip portable_lb_dsr mss ip saddr @vips tcp flags & (syn | ack) == syn | ack tcp option maxseg size > 1360 tcp option maxseg size set 1360",
        "",
      ].join("\n"),
    );
    expect(nodeTableScript({ vips: ["10.1.1.10"] })).toBe([...untrack, ""].join("\n"));
    expect(nodeTableScript(undefined)).toBe(
      "add table ip portable_lb_dsr\ndelete table ip portable_lb_dsr\n",
    );
  });

  it("reads its own table back (nft 1.0.6), and anything else in it as foreign", () => {
    const both = ["10.1.1.10", "10.1.1.11"];
    expect(parseNodeTable(listing())).toEqual({ vips: both, mss: 1360 });
    expect(parseNodeTable(listing(withoutMss))).toEqual({ vips: both });
    const noElements = (o: Listed) => {
      if (o.set) delete (o.set as { elem?: unknown }).elem;
      return o;
    };
    expect(parseNodeTable(listing(noElements))).toEqual({ vips: [], mss: 1360 });
    // A rule more, or one less (the earlier table untracked only the replies).
    const extra = JSON.parse(listing()) as { nftables: unknown[] };
    extra.nftables.push({ rule: { chain: "forwarded", expr: [{ accept: null }] } });
    expect(parseNodeTable(JSON.stringify(extra))).toBe("other");
    const rule = (o: Listed) => o.rule as { chain: string; handle: number; expr: unknown[] } | undefined;
    expect(parseNodeTable(listing((o) => (rule(o)?.handle === 3 ? undefined : o)))).toBe("other");
    // The rules swapped, or one without its fib (that also untracked packets to the node itself).
    const field = (e: unknown[]) => (e[0] as { match: { left: { payload: { field: string } } } }).match.left;
    const swapped = listing((o) => {
      const r = rule(o);
      if (r?.chain === "forwarded") field(r.expr).payload.field = r.handle === 3 ? "saddr" : "daddr";
      return o;
    });
    expect(parseNodeTable(swapped)).toBe("other");
    const noFib = listing((o) => {
      const r = rule(o);
      if (r?.handle === 4) r.expr.splice(1, 1);
      return o;
    });
    expect(parseNodeTable(noFib)).toBe("other");
    // The tunnel's rule for another VNI (someone else's VXLAN), or without it (the earlier table).
    const otherVni = listing((o) => {
      const r = rule(o);
      if (r?.handle === 7) (r.expr[1] as { match: { right: number } }).match.right = 42;
      return o;
    });
    expect(parseNodeTable(otherVni)).toBe("other");
    expect(parseNodeTable(listing((o) => (rule(o)?.handle === 7 ? undefined : o)))).toBe("other");
    // A clamp whose match and mangle disagree.
    const mismatched = listing((o) => {
      const r = rule(o);
      if (r?.chain === "mss") (r.expr[2] as { match: { right: number } }).match.right = 1400;
      return o;
    });
    expect(parseNodeTable(mismatched)).toBe("other");
  });

  it("changes by diff: nothing when equal, set elements when only VIPs differ, else a rewrite", () => {
    const want = { vips: ["10.1.1.10", "10.1.1.12"], mss: 1360 };
    expect(nodeTableChange(want, want)).toBe("");
    expect(nodeTableChange(undefined, undefined)).toBe("");
    expect(nodeTableChange({ vips: ["10.1.1.10", "10.1.1.11"], mss: 1360 }, want)).toBe(
      "add element ip portable_lb_dsr vips { 10.1.1.12 }\ndelete element ip portable_lb_dsr vips { 10.1.1.11 }\n",
    );
    expect(nodeTableChange({ ...want, mss: 1410 }, want)).toBe(nodeTableScript(want));
    // The first local backend pod arrives, or the last one leaves: the clamp comes or goes.
    expect(nodeTableChange({ vips: want.vips }, want)).toBe(nodeTableScript(want));
    expect(nodeTableChange(want, { vips: want.vips })).toBe(nodeTableScript({ vips: want.vips }));
    expect(nodeTableChange({ vips: ["10.1.1.10"] }, { vips: want.vips })).toBe(
      "add element ip portable_lb_dsr vips { 10.1.1.12 }\n",
    );
    expect(nodeTableChange("other", want)).toBe(nodeTableScript(want));
    expect(nodeTableChange(want, undefined)).toBe(nodeTableScript(undefined));
    fc.assert(
      fc.property(
        fc.subarray(["a", "b", "c", "d"]),
        fc.subarray(["a", "b", "c", "d"]),
        fc.constantFrom(undefined, 1),
        (current, desired, mss) => {
          const script = nodeTableChange({ vips: current, mss }, { vips: desired, mss });
          const added = /add element .* \{ (.*) \}/.exec(script)?.[1]?.split(", ") ?? [];
          const deleted = /delete element .* \{ (.*) \}/.exec(script)?.[1]?.split(", ") ?? [];
          expect([...current.filter((v) => !deleted.includes(v)), ...added].sort()).toEqual(
            [...desired].sort(),
          );
          for (const v of added) expect(current).not.toContain(v);
        },
      ),
    );
  });
});

describe("node rp_filter", () => {
  it("loosens only the interfaces (and all) that are strict", () => {
    const conf = JSON.stringify([
      { interface: "all", rp_filter: "strict" },
      { interface: "cni0", rp_filter: "off" },
      { interface: "veth1", rp_filter: "strict" },
      { interface: "eth0", rp_filter: "strict" },
    ]);
    expect(strictInterfaces(conf, ["cni0", "veth1", "veth1"])).toEqual(["all", "veth1"]);
    expect(allInterfaces(conf)).toEqual(["all", "cni0", "veth1", "eth0"]);
    expect(strictInterfaces(JSON.stringify([{ interface: "all", rp_filter: "loose" }]), ["cni0"])).toEqual(
      [],
    );
    expect(routeDevice(JSON.stringify([{ dst: "10.244.1.5", dev: "cni0", prefsrc: "10.244.1.1" }]))).toBe(
      "cni0",
    );
  });
});
