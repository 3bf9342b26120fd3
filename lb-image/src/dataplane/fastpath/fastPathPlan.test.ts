import { canonical, type VirtualService } from "../model.ts";
import { maglevTable } from "../nft/maglev.ts";
import { FastPathPlanner, plannedKeys } from "./fastPathPlan.ts";

const service = (vip: string, ips: string[], more: Partial<VirtualService> = {}): VirtualService => ({
  vip,
  port: 8080,
  protocol: "tcp",
  scheduler: "mh",
  forwarding: "dsr",
  backends: ips.map((ip) => ({ ip, port: 8080, weight: 1 })),
  ...more,
});

describe("the fast path's plan", () => {
  it("carries each DSR service with the nftables engine's Maglev table, slot for slot", () => {
    // Given in another order than canonical: the table must not depend on it.
    const s = service("10.1.1.10", ["10.244.2.7", "10.244.1.5", "10.244.1.20"]);
    const plan = new FastPathPlanner().plan([s]);
    const sorted = canonical([s])[0]!.backends;
    expect(plan.services).toEqual([
      { vip: "10.1.1.10", port: 8080, protocol: "tcp", table: maglevTable(sorted).map((i) => sorted[i]!.ip) },
    ]);
    expect(plan.services[0]!.table).toHaveLength(251);
  });

  it("leaves SNAT services, source-restricted ones and those without a live backend to the kernel path", () => {
    const plan = new FastPathPlanner().plan([
      service("10.1.1.10", ["10.244.1.5"]),
      service("10.1.1.11", ["10.244.1.6"], { forwarding: "snat" }),
      service("10.1.1.12", ["10.244.1.7"], { sourceRanges: ["0.0.0.0-255.255.255.255"] }),
      service("10.1.1.13", ["10.244.1.8"], { backends: [{ ip: "10.244.1.8", port: 8080, weight: 0 }] }),
    ]);
    expect([...plannedKeys(plan)]).toEqual(["tcp:10.1.1.10:8080"]);
    // Every DSR backend stays one: a flow the fast path saw keeps a draining or restricted backend.
    expect(plan.backends).toEqual(["10.244.1.5", "10.244.1.7", "10.244.1.8"]);
  });

  it("is the same object while nothing in it changes, and a new one when a backend does", () => {
    const planner = new FastPathPlanner();
    const first = planner.plan([service("10.1.1.10", ["10.244.1.5", "10.244.1.6"])]);
    expect(planner.plan([service("10.1.1.10", ["10.244.1.6", "10.244.1.5"])])).toBe(first);
    const next = planner.plan([service("10.1.1.10", ["10.244.1.5", "10.244.1.7"])]);
    expect(next).not.toBe(first);
    expect(new Set(next.services[0]!.table)).toEqual(new Set(["10.244.1.5", "10.244.1.7"]));
    // A draining backend changes no table, but the backends the flow table may still use.
    const draining = planner.plan([
      service("10.1.1.10", ["10.244.1.5", "10.244.1.7"], {
        backends: [
          { ip: "10.244.1.5", port: 8080, weight: 1 },
          { ip: "10.244.1.7", port: 8080, weight: 1 },
          { ip: "10.244.1.9", port: 8080, weight: 0 },
        ],
      }),
    ]);
    expect(draining).not.toBe(next);
    expect(draining.backends).toEqual(["10.244.1.5", "10.244.1.7", "10.244.1.9"]);
  });
});
