import type { V1Service } from "@kubernetes/client-node";
import type { VipPool } from "@portable-lb/core/config";
import fc from "fast-check";
import { PoolAddresses } from "./poolAddresses.ts";
import { lbService } from "./testing/k8sObjects.ts";
import { allocate, type AllocationResult } from "./vipAllocator.ts";
import { ingressOf } from "./statusWriter.ts";

const pools: VipPool[] = [
  { name: "web", cidr: "10.1.1.0/30", avoidBuggyIps: false },
  { name: "internal", cidr: "10.1.2.0/24", avoidBuggyIps: true },
];
const REQUEST = "portable-lb.io/load-balancer-ips";
const POOL = "portable-lb.io/vip-pool";

const vipsOf = (out: AllocationResult) => Object.fromEntries(out.allocations.map((a) => [a.service, a.vips]));
const reasons = (out: AllocationResult) => out.problems.map((p) => [p.object, p.reason]);
const day = (d: number) => `2026-01-${String(d).padStart(2, "0")}T00:00:00Z`;

describe("allocate", () => {
  it("keeps recorded VIPs, honors requests, and gives the others the lowest free address", () => {
    const out = allocate(
      [
        lbService("a", { vips: ["10.1.1.2"] }),
        lbService("b", { annotations: { [REQUEST]: "10.1.2.7" } }),
        lbService("c"),
        lbService("d", { annotations: { [POOL]: "internal" } }),
      ],
      pools,
    );
    expect(out.problems).toEqual([]);
    expect(out.allocations).toEqual([
      { service: "default/a", vips: ["10.1.1.2"] },
      {
        service: "default/b",
        vips: ["10.1.2.7"],
        change: {
          reason: "VipAllocated",
          message: `VIP 10.1.2.7 allocated: the Service requests it in ${REQUEST}`,
        },
      },
      {
        service: "default/c",
        vips: ["10.1.1.0"],
        change: {
          reason: "VipAllocated",
          message: "VIP 10.1.1.0 allocated: the lowest free address of pool web",
        },
      },
      {
        service: "default/d",
        vips: ["10.1.2.1"], // .0 skipped: avoidBuggyIps
        change: {
          reason: "VipAllocated",
          message: "VIP 10.1.2.1 allocated: the lowest free address of pool internal",
        },
      },
    ]);
  });

  it("fills the holes between recorded VIPs lowest first, across many Services and unusable addresses", () => {
    const pool: VipPool = { name: "big", cidr: "10.2.0.0/23", avoidBuggyIps: true };
    const recorded = ["10.2.0.2", "10.2.0.254", "10.2.1.1"];
    const fresh = Array.from({ length: 6 }, (_, i) => lbService(`n${i}`, { created: day(i + 2) }));
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

  describe("a request for another Service's VIP (issue 13)", () => {
    // The lab's case: old and young hold .1 and .2, a third Service that requested nothing holds .3.
    const three = (oldAsks?: string, youngAsks?: string) => [
      lbService("old", {
        vips: ["10.1.1.1"],
        created: day(1),
        ...(oldAsks && { annotations: { [REQUEST]: oldAsks } }),
      }),
      lbService("young", {
        vips: ["10.1.1.2"],
        created: day(2),
        ...(youngAsks && { annotations: { [REQUEST]: youngAsks } }),
      }),
      lbService("third", { vips: ["10.1.1.3"], created: day(3) }),
    ];
    const unchanged = {
      "default/old": ["10.1.1.1"],
      "default/young": ["10.1.1.2"],
      "default/third": ["10.1.1.3"],
    };

    it("an older Service asking for a younger one's VIP waits; nobody moves", () => {
      const out = allocate(three("10.1.1.2"), pools);
      expect(vipsOf(out)).toEqual(unchanged);
      expect(out.allocations.filter((a) => a.change)).toEqual([]);
      expect(out.problems).toEqual([
        {
          object: "default/old",
          kind: "Service",
          reason: "VipInUse",
          message: `VIP 10.1.1.2 belongs to default/young; this request waits until default/young gives it up (is deleted, or requests other addresses in ${REQUEST}), or change this Service's request to a free address; default/old keeps 10.1.1.1 meanwhile`,
        },
      ]);
    });

    it("a younger Service asking for an older one's VIP waits too", () => {
      const out = allocate(three(undefined, "10.1.1.1"), pools);
      expect(vipsOf(out)).toEqual(unchanged);
      expect(reasons(out)).toEqual([["default/young", "VipInUse"]]);
      expect(out.problems[0]!.message).toMatch(
        /^VIP 10\.1\.1\.1 belongs to default\/old; .* default\/young keeps 10\.1\.1\.2 meanwhile$/,
      );
    });

    it("gets the address once its holder lets it go, in the same run as the holder's own move", () => {
      // young moves to .0 (free): .2 is released and old's request is met at once.
      const out = allocate(three("10.1.1.2", "10.1.1.0"), pools);
      expect(vipsOf(out)).toEqual({
        "default/old": ["10.1.1.2"],
        "default/young": ["10.1.1.0"],
        "default/third": ["10.1.1.3"],
      });
      expect(out.problems).toEqual([]);
      expect(out.allocations.find((a) => a.service === "default/old")!.change).toEqual({
        reason: "VipChanged",
        message: `VIP changed from 10.1.1.1 to 10.1.1.2: the Service requests it in ${REQUEST}`,
      });
    });

    it("two Services swapping addresses both wait: no moment where one address has two owners", () => {
      const out = allocate(three("10.1.1.2", "10.1.1.1"), pools);
      expect(vipsOf(out)).toEqual(unchanged);
      expect(reasons(out)).toEqual([
        ["default/old", "VipInUse"],
        ["default/young", "VipInUse"],
      ]);
    });

    it("the older of two new Services asking for one free address gets it", () => {
      const out = allocate(
        [
          lbService("second", { created: day(2), annotations: { [REQUEST]: "10.1.2.9" } }),
          lbService("first", { created: day(1), annotations: { [REQUEST]: "10.1.2.9" } }),
        ],
        pools,
      );
      expect(vipsOf(out)).toEqual({ "default/first": ["10.1.2.9"], "default/second": [] });
      expect(out.problems[0]!.message).toMatch(/belongs to default\/first; .*; it has no address meanwhile$/);
    });
  });

  it("meets a request of several addresses as a whole or not at all, and keeps its free part for it", () => {
    const out = allocate(
      [
        lbService("holder", { vips: ["10.1.2.5"], created: day(1) }),
        lbService("asker", {
          vips: ["10.1.2.4"],
          created: day(2),
          annotations: { [REQUEST]: "10.1.2.1, 10.1.2.5" },
        }),
        // 10.1.2.1 is free, but requested: a Service that asked for nothing gets the next one.
        lbService("fresh", { created: day(3), annotations: { [POOL]: "internal" } }),
      ],
      pools,
    );
    expect(vipsOf(out)).toEqual({
      "default/holder": ["10.1.2.5"],
      "default/asker": ["10.1.2.4"],
      "default/fresh": ["10.1.2.2"],
    });
    expect(reasons(out)).toEqual([["default/asker", "VipInUse"]]);
  });

  it("a typo in a request takes nothing away: the Service keeps its VIP and is told", () => {
    const out = allocate(
      [
        lbService("garbage", { vips: ["10.1.1.1"], annotations: { [REQUEST]: "10.1.1.999" } }),
        lbService("outside", { vips: ["10.1.1.2"], annotations: { [REQUEST]: "192.0.2.1" } }),
        lbService("new", { annotations: { [REQUEST]: "10.1.2.256" } }),
      ],
      pools,
    );
    expect(vipsOf(out)).toEqual({
      "default/garbage": ["10.1.1.1"],
      "default/outside": ["10.1.1.2"],
      "default/new": [],
    });
    expect(out.problems.map((p) => p.message)).toEqual([
      `requested VIP "10.1.1.999" is not an IPv4 address; fix ${REQUEST}; default/garbage keeps 10.1.1.1 meanwhile`,
      `requested VIP "10.1.2.256" is not an IPv4 address; fix ${REQUEST}; it has no address meanwhile`,
      "requested VIP 192.0.2.1 is outside every pool (web 10.1.1.0/30, internal 10.1.2.0/24; .0 and .255 are left out where a pool avoids them); pick one inside a pool or drop the request; default/outside keeps 10.1.1.2 meanwhile",
    ]);
  });

  it("dropping a request keeps the address it gave", () => {
    const out = allocate([lbService("a", { vips: ["10.1.2.77"] })], pools);
    expect(out.allocations).toEqual([{ service: "default/a", vips: ["10.1.2.77"] }]);
  });

  it("writes back a status whose form someone changed (ipMode VIP would let kube-proxy bypass the LBs)", () => {
    const svc = lbService("a", { vips: ["10.1.2.77"] });
    const changed = { ...svc, status: { loadBalancer: { ingress: [{ ip: "10.1.2.77", ipMode: "VIP" }] } } };
    const out = allocate([changed], pools);
    expect(out.allocations).toEqual([
      {
        service: "default/a",
        vips: ["10.1.2.77"],
        change: { reason: "VipStatusRepaired", message: expect.stringContaining("ipMode Proxy") },
      },
    ]);
    // As the controller writes it, the status needs nothing.
    expect(allocate([svc], pools).allocations[0]!.change).toBeUndefined();
  });

  it("two statuses holding one address (state written elsewhere): the oldest keeps it, the other is told and renumbered", () => {
    const out = allocate(
      [
        lbService("copy", { vips: ["10.1.1.0"], created: day(5), uid: "u-copy" }),
        lbService("orig", { vips: ["10.1.1.0"], created: day(1) }),
      ],
      pools,
    );
    expect(vipsOf(out)).toEqual({ "default/orig": ["10.1.1.0"], "default/copy": ["10.1.1.1"] });
    expect(out.problems).toEqual([
      {
        object: "default/copy",
        uid: "u-copy",
        kind: "Service",
        reason: "VipDuplicate",
        message:
          "VIP 10.1.1.0 is recorded in the status of both default/orig and this Service (written outside portable-lb's allocator, e.g. restored from a backup); the older one, default/orig, keeps it and this Service gets another address",
      },
    ]);
    expect(out.allocations.find((a) => a.service === "default/copy")!.change).toEqual({
      reason: "VipChanged",
      message:
        "VIP changed from 10.1.1.0 to 10.1.1.1: 10.1.1.0 is also recorded for the older Service default/orig, which keeps it",
    });
  });

  it("moves a Service into the pool its annotation names when that pool has room, else keeps its VIP", () => {
    const moved = allocate(
      [lbService("a", { vips: ["10.1.1.1"], annotations: { [POOL]: "internal" } })],
      pools,
    );
    expect(moved.allocations).toEqual([
      {
        service: "default/a",
        vips: ["10.1.2.1"],
        change: {
          reason: "VipChanged",
          message: `VIP changed from 10.1.1.1 to 10.1.2.1: the Service asks for pool internal in ${POOL}`,
        },
      },
    ]);
    const full = ["10.1.1.0", "10.1.1.1", "10.1.1.2", "10.1.1.3"].map((ip, i) =>
      lbService(`w${i}`, { vips: [ip] }),
    );
    const stays = allocate(
      [...full, lbService("b", { vips: ["10.1.2.3"], annotations: { [POOL]: "web" } })],
      pools,
    );
    expect(vipsOf(stays)["default/b"]).toEqual(["10.1.2.3"]);
    expect(stays.problems.map((p) => p.message)).toEqual([
      "no free VIP in pool web; add addresses to a pool or delete unused Services; default/b keeps 10.1.2.3 meanwhile",
    ]);
    const typo = allocate([lbService("c", { vips: ["10.1.1.1"], annotations: { [POOL]: "webb" } })], pools);
    expect(typo.allocations).toEqual([{ service: "default/c", vips: ["10.1.1.1"] }]);
    expect(typo.problems.map((p) => p.message)).toEqual([
      `VIP pool "webb" (${POOL}) does not exist; use one of: web, internal; default/c keeps 10.1.1.1 meanwhile`,
    ]);
  });

  it("renumbers a VIP that no pool holds any more, and says why", () => {
    const out = allocate([lbService("a", { vips: ["10.9.9.9"] })], pools);
    expect(out.allocations).toEqual([
      {
        service: "default/a",
        vips: ["10.1.1.0"],
        change: {
          reason: "VipChanged",
          message: "VIP changed from 10.9.9.9 to 10.1.1.0: 10.9.9.9 is in no VIP pool (any more)",
        },
      },
    ]);
  });

  it("reports requests outside the pools, bad addresses, unknown pools and exhaustion without crashing", () => {
    const out = allocate(
      [
        lbService("outside", { annotations: { [REQUEST]: "192.0.2.1" } }),
        lbService("garbage", { annotations: { [REQUEST]: "10.1.1.999" } }),
        lbService("nopool", { annotations: { [POOL]: "dmz" } }),
        ...["w1", "w2", "w3", "w4", "w5"].map((n) => lbService(n, { annotations: { [POOL]: "web" } })),
      ],
      pools,
    );
    expect(reasons(out).sort()).toEqual([
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
      undefined,
    ]);
  });

  it("hands a pool with autoAssign false only to Services that name it or request its addresses", () => {
    const shared: VipPool = { name: "from-a", cidr: "10.1.9.0/30", avoidBuggyIps: false, autoAssign: false };
    const withShared = [shared, ...pools];
    const out = allocate(
      [
        lbService("plain", { created: day(1) }),
        lbService("named", { created: day(2), annotations: { [POOL]: "from-a" } }),
        lbService("asked", { created: day(3), annotations: { [REQUEST]: "10.1.9.3" } }),
      ],
      withShared,
    );
    // The first pool is the shared one, yet the Service that asked for nothing skips it.
    expect(vipsOf(out)).toEqual({
      "default/plain": ["10.1.1.0"],
      "default/named": ["10.1.9.0"],
      "default/asked": ["10.1.9.3"],
    });
    expect(out.problems).toEqual([]);

    // No pool left that auto-assigns: told why, and what to do.
    const none = allocate([lbService("plain")], [shared]);
    expect(vipsOf(none)).toEqual({ "default/plain": [] });
    expect(none.problems.map((p) => [p.reason, p.message])).toEqual([
      [
        "NoAutoAssignPool",
        "every VIP pool has autoAssign: false (from-a), so a Service that asks for no pool gets no address; name a pool in portable-lb.io/vip-pool or request an address in portable-lb.io/load-balancer-ips; it has no address meanwhile",
      ],
    ]);
  });

  it("allocates for 10,000 Services in well under a second (one pass over each pool)", () => {
    const pool: VipPool = { name: "big", cidr: "10.8.0.0/16", avoidBuggyIps: true };
    const services: V1Service[] = Array.from({ length: 10_000 }, (_, i) =>
      lbService(`s${i}`, {
        created: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
        // Every third one has a VIP recorded, every seventh asks for one: holes to fill everywhere.
        ...(i % 3 === 0 && { vips: [`10.8.${Math.floor(i / 250)}.${(i % 250) + 1}`] }),
        ...(i % 7 === 0 && { annotations: { [REQUEST]: `10.8.200.${(i % 250) + 1}` } }),
      }),
    );
    allocate(services, [pool]); // warm up
    const t = performance.now();
    const out = allocate(services, [pool]);
    const ms = performance.now() - t;
    expect(new Set(out.allocations.flatMap((a) => a.vips)).size).toBe(
      out.allocations.flatMap((a) => a.vips).length,
    );
    expect(ms).toBeLessThan(1_000);
  });

  describe("on any set of Services (properties)", () => {
    // Tiny pools (a: .1-.3, b: .0-.1) so Services compete and run out; statuses may hold addresses
    // twice, outside every pool, or .0 where pool a avoids it, as state written elsewhere may.
    const tiny: VipPool[] = [
      { name: "a", cidr: "10.1.1.0/30", avoidBuggyIps: true },
      { name: "b", cidr: "10.1.2.0/31", avoidBuggyIps: false },
    ];
    const inPools = new PoolAddresses(tiny);
    const ip = fc.constantFrom(
      "10.1.1.1",
      "10.1.1.2",
      "10.1.1.3",
      "10.1.2.0",
      "10.1.2.1",
      "10.1.1.0",
      "10.9.9.9",
    );
    interface Spec {
      day: number;
      status: string[];
      request?: string[] | undefined;
      pool?: string | undefined;
    }
    // Plain records, so a counterexample reads as the Services' specs (s0, s1, ... in order).
    const specs: fc.Arbitrary<Spec[]> = fc.array(
      fc.record({
        day: fc.integer({ min: 1, max: 3 }),
        status: fc.uniqueArray(ip, { maxLength: 2 }),
        request: fc.option(
          fc.uniqueArray(fc.oneof(ip, fc.constant("10.1.1.x")), { minLength: 1, maxLength: 2 }),
          {
            nil: undefined,
          },
        ),
        pool: fc.option(fc.constantFrom("a", "b", "zz"), { nil: undefined }),
      }),
      { maxLength: 8 },
    );
    const build = (spec: Spec[]) =>
      spec.map((o, i) =>
        lbService(`s${i}`, {
          created: day(o.day),
          vips: o.status,
          annotations: {
            ...(o.request && { [REQUEST]: o.request.join(",") }),
            ...(o.pool && { [POOL]: o.pool }),
          },
        }),
      );
    const statusOf = (svc: V1Service) => (svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip!);
    const older = (a: V1Service, b: V1Service) =>
      a.metadata!.creationTimestamp!.getTime() < b.metadata!.creationTimestamp!.getTime() ||
      (a.metadata!.creationTimestamp!.getTime() === b.metadata!.creationTimestamp!.getTime() &&
        a.metadata!.name! < b.metadata!.name!);

    it("shares no address, keeps every one in a pool, and changes a status only for a reason", () => {
      fc.assert(
        fc.property(specs, (spec) => {
          const all = build(spec);
          const out = allocate(all, tiny);
          const vips = out.allocations.flatMap((a) => a.vips);
          expect(new Set(vips).size).toBe(vips.length);
          for (const v of vips) expect(inPools.poolOf(v)).toBeDefined();
          for (const svc of all) {
            const was = statusOf(svc);
            const now = vipsOf(out)[`default/${svc.metadata!.name}`]!;
            if (now.join(",") === was.join(",")) continue;
            const asked = svc.metadata!.annotations?.[REQUEST]?.split(",");
            const pool = svc.metadata!.annotations?.[POOL];
            // State it could not keep: an address out of every pool, or also an older one's.
            const lost = was.some(
              (v) =>
                !inPools.poolOf(v) || all.some((o) => o !== svc && statusOf(o).includes(v) && older(o, svc)),
            );
            const met =
              asked !== undefined && now.length === asked.length && asked.every((v) => now.includes(v));
            const fresh = !asked && (was.length === 0 || lost);
            const moved =
              !asked && pool !== undefined && now.length === 1 && inPools.poolOf(now[0]!)?.name === pool;
            expect({ service: svc.metadata!.name, was, now, reason: met || fresh || moved || lost }).toEqual({
              service: svc.metadata!.name,
              was,
              now,
              reason: true,
            });
          }
        }),
        { numRuns: 2000 },
      );
    });

    it("is a fixed point of its own result and does not depend on the order it reads Services in", () => {
      fc.assert(
        fc.property(specs, fc.nat(), (spec, rotation) => {
          const all = build(spec);
          const out = allocate(all, tiny);
          const written = all.map((svc) => ({
            ...svc,
            status: {
              loadBalancer: {
                ingress: ingressOf(vipsOf(out)[`default/${svc.metadata!.name}`]!),
              },
            },
          }));
          const again = allocate(written, tiny);
          expect(again.allocations.filter((a) => a.change)).toEqual([]);
          expect(vipsOf(again)).toEqual(vipsOf(out));
          const k = all.length ? rotation % all.length : 0;
          expect(allocate([...all.slice(k), ...all.slice(0, k)].reverse(), tiny)).toEqual(out);
        }),
        { numRuns: 2000 },
      );
    });
  });
});
