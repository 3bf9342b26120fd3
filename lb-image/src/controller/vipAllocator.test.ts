import type { VipPool } from "@portable-lb/core/config";
import { lbService } from "./testing/k8sObjects.ts";
import { allocate } from "./vipAllocator.ts";

const pools: VipPool[] = [
  { name: "web", cidr: "10.1.1.0/30", avoidBuggyIps: false },
  { name: "internal", cidr: "10.1.2.0/24", avoidBuggyIps: true },
];

describe("allocate", () => {
  it("keeps recorded VIPs, honors requests, and gives the others the lowest free address", () => {
    const out = allocate(
      [
        lbService("a", { vips: ["10.1.1.2"] }),
        lbService("b", { annotations: { "portable-lb.io/load-balancer-ips": "10.1.2.7" } }),
        lbService("c"),
        lbService("d", { annotations: { "portable-lb.io/vip-pool": "internal" } }),
      ],
      pools,
    );
    expect(out.problems).toEqual([]);
    expect(out.allocations).toEqual([
      { service: "default/a", vips: ["10.1.1.2"] },
      { service: "default/b", vips: ["10.1.2.7"] },
      { service: "default/c", vips: ["10.1.1.0"] },
      { service: "default/d", vips: ["10.1.2.1"] }, // .0 skipped: avoidBuggyIps
    ]);
  });

  it("fills the holes between recorded VIPs lowest first, across many Services and unusable addresses", () => {
    const pool: VipPool = { name: "big", cidr: "10.2.0.0/23", avoidBuggyIps: true };
    const recorded = ["10.2.0.2", "10.2.0.254", "10.2.1.1"];
    const fresh = Array.from({ length: 6 }, (_, i) =>
      lbService(`n${i}`, { created: `2026-02-0${i + 1}T00:00:00Z` }),
    );
    const out = allocate([...recorded.map((ip, i) => lbService(`r${i}`, { vips: [ip] })), ...fresh], [pool]);
    expect(out.problems).toEqual([]);
    expect(out.allocations.filter((a) => a.service.startsWith("default/n")).map((a) => a.vips[0])).toEqual([
      "10.2.0.1",
      "10.2.0.3",
      "10.2.0.4",
      "10.2.0.5",
      "10.2.0.6",
      "10.2.0.7",
    ]);
    const many = Array.from({ length: 300 }, (_, i) => lbService(`m${String(i).padStart(3, "0")}`));
    const vips = allocate([...recorded.map((ip, i) => lbService(`r${i}`, { vips: [ip] })), ...many], [pool])
      .allocations.filter((a) => a.service.startsWith("default/m"))
      .map((a) => a.vips[0]);
    // .0, .255 skipped (avoidBuggyIps) and the recorded ones skipped: 300 distinct addresses in order.
    expect(new Set(vips).size).toBe(300);
    expect(vips.slice(251, 257)).toEqual([
      "10.2.0.253",
      "10.2.1.2",
      "10.2.1.3",
      "10.2.1.4",
      "10.2.1.5",
      "10.2.1.6",
    ]);
  });

  it("never hands one address to two Services: the older keeps it, the newer is told why", () => {
    const out = allocate(
      [
        lbService("new", {
          annotations: { "portable-lb.io/load-balancer-ips": "10.1.1.1" },
          created: "2026-03-01T00:00:00Z",
        }),
        lbService("old", { vips: ["10.1.1.1"], created: "2026-01-01T00:00:00Z" }),
      ],
      pools,
    );
    expect(out.allocations).toEqual([
      { service: "default/old", vips: ["10.1.1.1"] },
      { service: "default/new", vips: [] },
    ]);
    expect(out.problems).toEqual([
      {
        object: "default/new",
        kind: "Service",
        reason: "VipInUse",
        message: "VIP 10.1.1.1 is already used by default/old; pick another or drop the request",
      },
    ]);
  });

  it("reports requests outside the pools, bad addresses, unknown pools and exhaustion without crashing", () => {
    const out = allocate(
      [
        lbService("outside", { annotations: { "portable-lb.io/load-balancer-ips": "192.0.2.1" } }),
        lbService("garbage", { annotations: { "portable-lb.io/load-balancer-ips": "10.1.1.999" } }),
        lbService("nopool", { annotations: { "portable-lb.io/vip-pool": "dmz" } }),
        ...["w1", "w2", "w3", "w4", "w5"].map((n) =>
          lbService(n, { annotations: { "portable-lb.io/vip-pool": "web" } }),
        ),
      ],
      pools,
    );
    expect(out.problems.map((p) => [p.object, p.reason]).sort()).toEqual([
      ["default/garbage", "InvalidVip"],
      ["default/nopool", "UnknownPool"],
      ["default/outside", "VipOutsidePools"],
      ["default/w5", "PoolExhausted"],
    ]);
    expect(out.allocations.filter((a) => a.service.startsWith("default/w")).map((a) => a.vips[0])).toEqual([
      "10.1.1.0",
      "10.1.1.1",
      "10.1.1.2",
      "10.1.1.3",
    ]);
  });
});
