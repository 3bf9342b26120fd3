import { parseOrThrow } from "../validation.ts";
import { lbConfigSchema, usesFastPath, type LbConfigInput } from "./lbConfig.ts";

const good: LbConfigInput = {
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "default", cidr: "10.1.1.0/24" }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
};

const parse = (c: unknown) => parseOrThrow(lbConfigSchema, c, "lb");

describe("lbConfigSchema", () => {
  it("fills in the defaults a production LB wants", () => {
    expect(parse(good)).toEqual({
      loadBalancerClass: "portable-lb.io/ecmp",
      // Another load balancer may own classless Services: not ours unless chosen.
      serveClassless: false,
      routingMode: "bgp",
      podCidr: "10.244.0.0/16",
      vipPools: [{ name: "default", cidr: "10.1.1.0/24", avoidBuggyIps: false }],
      dataPlane: { engine: "auto", mode: "snat", scheduler: "mh", fastPath: "auto" },
      bgp: {
        asn: 64512,
        routeReflectors: ["10.0.0.5"],
        bfd: { minRxMs: 300, minTxMs: 300, multiplier: 3 },
        timers: { holdTimeS: 9, keepaliveS: 3 },
        gracefulRestartS: 120,
      },
      drain: { quietS: 3, timeoutS: 30 },
      ports: { metrics: 9150, health: 9151, nodeAgent: 9152 },
    });
  });

  it("takes a short quiet period where the counters are exact (nftables)", () => {
    expect(parse({ ...good, dataPlane: { engine: "nftables" }, drain: { quietS: 1 } }).drain).toEqual({
      quietS: 1,
      timeoutS: 30,
    });
  });

  it("takes DSR on either engine (IPVS tunnels in IPIP, nftables in VXLAN)", () => {
    for (const engine of ["ipvs", "nftables", "auto"] as const)
      expect(parse({ ...good, dataPlane: { engine, mode: "dsr" } }).dataPlane).toMatchObject({
        engine,
        mode: "dsr",
      });
  });

  it("runs the fast path with DSR on nftables unless it is off", () => {
    const fast = (dataPlane: object) => usesFastPath(parse({ ...good, dataPlane }).dataPlane);
    expect(fast({ mode: "dsr" })).toBe(true);
    expect(fast({ mode: "dsr", engine: "nftables" })).toBe(true);
    expect(fast({ mode: "dsr", fastPath: "off" })).toBe(false);
    expect(fast({ mode: "dsr", engine: "ipvs" })).toBe(false);
    expect(fast({ mode: "snat" })).toBe(false);
  });

  it.each<[string, unknown, string]>([
    [
      "ASN out of range",
      { ...good, bgp: { asn: 4294967296, routeReflectors: ["10.0.0.5"] } },
      "lb.bgp.asn: is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294 (got 4294967296)",
    ],
    [
      "AS_TRANS",
      { ...good, bgp: { asn: 23456, routeReflectors: ["10.0.0.5"] } },
      "lb.bgp.asn: is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294 (got 23456)",
    ],
    [
      "BGP mode without peers",
      { ...good, bgp: undefined },
      "lb.bgp: is required when routingMode is bgp: set bgp.asn and bgp.routeReflectors (not set)",
    ],
    [
      "no route reflector",
      { ...good, bgp: { asn: 64512, routeReflectors: [] } },
      "lb.bgp.routeReflectors: needs at least one route reflector address (got [])",
    ],
    [
      "bad reflector address",
      { ...good, bgp: { asn: 64512, routeReflectors: ["10.0.0"] } },
      'lb.bgp.routeReflectors[0]: not an IPv4 address; write it like 10.0.0.1 (got "10.0.0")',
    ],
    [
      "cloud routes without settings",
      { ...good, routingMode: "cloud-routes", bgp: undefined },
      "lb.cloudRoutes: is required when routingMode is cloud-routes: set cloudRoutes.cloud (not set)",
    ],
    [
      "unknown routing mode",
      { ...good, routingMode: "ospf" },
      'lb.routingMode: must be one of: bgp, cloud-routes (got "ospf")',
    ],
    [
      "VIP pool inside the pod CIDR",
      { ...good, vipPools: [{ name: "a", cidr: "10.244.7.0/24" }] },
      'lb.vipPools[0].cidr: overlaps podCidr 10.244.0.0/16; VIPs must lie outside the pod network (got "10.244.7.0/24")',
    ],
    [
      "overlapping pools",
      {
        ...good,
        vipPools: [
          { name: "a", cidr: "10.1.0.0/16" },
          { name: "b", cidr: "10.1.2.0/24" },
        ],
      },
      'lb.vipPools[1].cidr: overlaps vipPools[0] (10.1.0.0/16); pools must not share addresses (got "10.1.2.0/24")',
    ],
    [
      "duplicate pool names",
      {
        ...good,
        vipPools: [
          { name: "a", cidr: "10.1.1.0/24" },
          { name: "a", cidr: "10.1.2.0/24" },
        ],
      },
      'lb.vipPools[1].name: duplicates the name of vipPools[0]; give each pool its own name (got "a")',
    ],
    [
      "host bits set",
      { ...good, vipPools: [{ name: "a", cidr: "10.1.1.7/24" }] },
      'lb.vipPools[0].cidr: host bits are set; write the network address 10.1.1.0/24 (got "10.1.1.7/24")',
    ],
    [
      "not a prefix",
      { ...good, podCidr: "10.244.0.0" },
      'lb.podCidr: not an IPv4 prefix; write it like 10.0.0.0/24 (got "10.244.0.0")',
    ],
    [
      "no pools",
      { ...good, vipPools: [] },
      "lb.vipPools: needs at least one pool, e.g. { name: 'default', cidr: '10.1.1.0/24' } (got [])",
    ],
    [
      "bad class",
      { ...good, loadBalancerClass: "ecmp" },
      'lb.loadBalancerClass: must be a domain-prefixed name like portable-lb.io/ecmp (got "ecmp")',
    ],
    [
      "unknown scheduler",
      { ...good, dataPlane: { scheduler: "sh" } },
      'lb.dataPlane.scheduler: must be one of: mh, rr, wrr, lc; did you mean "mh"? (got "sh")',
    ],
    [
      "keepalive too long",
      {
        ...good,
        bgp: { asn: 64512, routeReflectors: ["10.0.0.5"], timers: { holdTimeS: 9, keepaliveS: 5 } },
      },
      "lb.bgp.timers.keepaliveS: keepaliveS must be at most a third of holdTimeS (RFC 4271 recommends hold = 3 × keepalive) (got 5)",
    ],
    [
      "a quiet period the drain timeout cuts off",
      { ...good, drain: { quietS: 20, timeoutS: 10 } },
      "lb.drain.quietS: must be below drain.timeoutS (10), or the quiet period could never end the drain; lower it or raise drain.timeoutS (got 20)",
    ],
    [
      "a quiet period shorter than IPVS's counter refresh",
      { ...good, dataPlane: { engine: "ipvs" }, drain: { quietS: 1 } },
      "lb.drain.quietS: must be at least 2.5 with dataPlane.engine ipvs (IPVS updates its connection counters every 2 s); raise it, or use dataPlane.engine nftables (got 1)",
    ],
    [
      "DSR with cloud routes",
      {
        ...good,
        routingMode: "cloud-routes",
        cloudRoutes: { cloud: "aws", routeTableIds: ["rtb-0abc"] },
        dataPlane: { mode: "dsr" },
      },
      'lb.dataPlane.mode: dsr cannot be used with routingMode cloud-routes: the cloud drops replies that leave a backend\'s node with the VIP as their source; use snat (got "dsr")',
    ],
    [
      "the engine where the forwarding mode goes",
      { ...good, dataPlane: { mode: "ipvs" } },
      'lb.dataPlane.mode: must be dsr or snat; the engine (auto, ipvs, nftables) is set in dataPlane.engine (got "ipvs")',
    ],
    [
      "same ports",
      { ...good, ports: { metrics: 9000, health: 9000 } },
      "lb.ports.health: must differ from ports.metrics (got 9000)",
    ],
  ])("rejects %s with an error naming field, value and fix", (_what, input, message) => {
    expect(() => parse(input)).toThrow(message);
    try {
      parse(input);
    } catch (err) {
      expect((err as Error).message).toBe(message);
    }
  });
});
