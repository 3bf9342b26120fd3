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
