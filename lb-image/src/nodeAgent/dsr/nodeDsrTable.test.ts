import fc from "fast-check";
import { desiredNodeTable, nodeTableChange, nodeTableScript, parseNodeTable } from "./nodeDsrTable.ts";
import { allInterfaces, routeDevice, strictInterfaces } from "./nodeRpFilter.ts";

// `nft -j list table ip portable_lb_dsr` of what nodeTableScript({ vips: [10, 11], mss: 1360 }) makes (nft 1.0.6).
const listing = (elem: string[], mss = 1360, extraRule = false, fib = true) =>
  JSON.stringify({
    nftables: [
      { metainfo: { version: "1.0.6" } },
      { table: { family: "ip", name: "portable_lb_dsr", handle: 1 } },
      {
        set: {
          family: "ip",
          name: "vips",
          table: "portable_lb_dsr",
          type: "ipv4_addr",
          handle: 1,
          ...(elem.length && { elem }),
        },
      },
      {
        chain: {
          family: "ip",
          table: "portable_lb_dsr",
          name: "replies",
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
          handle: 4,
          type: "filter",
          hook: "forward",
          prio: -150,
          policy: "accept",
        },
      },
      {
        rule: {
          chain: "replies",
          expr: [
            { match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: "@vips" } },
            ...(fib
              ? [{ match: { op: "!=", left: { fib: { result: "type", flags: ["daddr"] } }, right: "local" } }]
              : []),
            { notrack: null },
          ],
        },
      },
      ...(extraRule ? [{ rule: { chain: "replies", expr: [{ accept: null }] } }] : []),
      {
        rule: {
          chain: "mss",
          expr: [
            { match: { op: "==", left: { payload: { protocol: "ip", field: "saddr" } }, right: "@vips" } },
            {
              match: {
                op: "==",
                left: { "&": [{ payload: { protocol: "tcp", field: "flags" } }, ["syn", "ack"]] },
                right: ["syn", "ack"],
              },
            },
            { match: { op: ">", left: { "tcp option": { name: "maxseg", field: "size" } }, right: mss } },
            { mangle: { key: { "tcp option": { name: "maxseg", field: "size" } }, value: mss } },
          ],
        },
      },
    ],
  });

describe("node DSR table", () => {
  it("clamps to the smallest local pod MTU less the tunnel and headers; no VIP or pod: no table", () => {
    expect(desiredNodeTable(["10.1.1.11", "10.1.1.10"], [1500, 1450])).toEqual({
      vips: ["10.1.1.10", "10.1.1.11"],
      mss: 1360,
    });
    expect(desiredNodeTable([], [1450])).toBeUndefined();
    expect(desiredNodeTable(["10.1.1.10"], [])).toBeUndefined();
  });

  it("renders one atomic script: notrack for replies from a VIP, MSS clamp on their SYN-ACKs", () => {
    expect(nodeTableScript({ vips: ["10.1.1.10"], mss: 1360 })).toBe(
      [
        "add table ip portable_lb_dsr",
        "delete table ip portable_lb_dsr",
        "add table ip portable_lb_dsr",
        "add set ip portable_lb_dsr vips { type ipv4_addr ; }",
        "add element ip portable_lb_dsr vips { 10.1.1.10 }",
        "add chain ip portable_lb_dsr replies { type filter hook prerouting priority raw ; policy accept ; }",
        "add rule ip portable_lb_dsr replies ip saddr @vips fib daddr type != local notrack",
        "add chain ip portable_lb_dsr mss { type filter hook forward priority mangle ; policy accept ; }",
        "add rule ip portable_lb_dsr mss ip saddr @vips tcp flags & (syn | ack) == syn | ack tcp option maxseg size > 1360 tcp option maxseg size set 1360",
        "",
      ].join("\n"),
    );
    expect(nodeTableScript(undefined)).toBe(
      "add table ip portable_lb_dsr\ndelete table ip portable_lb_dsr\n",
    );
  });

  it("reads its own table back, and anything else in it as foreign", () => {
    expect(parseNodeTable(listing(["10.1.1.11", "10.1.1.10"]))).toEqual({
      vips: ["10.1.1.10", "10.1.1.11"],
      mss: 1360,
    });
    expect(parseNodeTable(listing([]))).toEqual({ vips: [], mss: 1360 });
    expect(parseNodeTable(listing(["10.1.1.10"], 1360, true))).toBe("other");
    // An older rule that also untracked packets to the node itself.
    expect(parseNodeTable(listing(["10.1.1.10"], 1360, false, false))).toBe("other");
  });

  it("changes by diff: nothing when equal, set elements when only VIPs differ, else a rewrite", () => {
    const want = { vips: ["10.1.1.10", "10.1.1.12"], mss: 1360 };
    expect(nodeTableChange(want, want)).toBe("");
    expect(nodeTableChange(undefined, undefined)).toBe("");
    expect(nodeTableChange({ vips: ["10.1.1.10", "10.1.1.11"], mss: 1360 }, want)).toBe(
      "add element ip portable_lb_dsr vips { 10.1.1.12 }\ndelete element ip portable_lb_dsr vips { 10.1.1.11 }\n",
    );
    expect(nodeTableChange({ ...want, mss: 1410 }, want)).toBe(nodeTableScript(want));
    expect(nodeTableChange("other", want)).toBe(nodeTableScript(want));
    expect(nodeTableChange(want, undefined)).toBe(nodeTableScript(undefined));
    fc.assert(
      fc.property(
        fc.subarray(["a", "b", "c", "d"]),
        fc.subarray(["a", "b", "c", "d"]),
        (current, desired) => {
          const script = nodeTableChange({ vips: current, mss: 1 }, { vips: desired, mss: 1 });
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
