// The reconciler against a fake cluster view and data plane: what it skips when nothing changed.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import { pino } from "pino";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import type { SkippedItem } from "./desiredState.ts";
import { ControllerMetrics } from "./metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { CLASS, lbService } from "./testing/k8sObjects.ts";

const config = lbConfigSchema.parse({
  loadBalancerClass: CLASS,
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});

describe("Reconciler", () => {
  it("allocates again only when the Services changed, and reports the allocation's problems every run", async () => {
    let services: V1Service[] = [
      lbService("new"),
      lbService("outside", { annotations: { "portable-lb.io/load-balancer-ips": "192.0.2.1" } }),
    ];
    const writes: string[] = [];
    const reports: SkippedItem[][] = [];
    const engine: DataPlaneEngine = {
      name: "nftables",
      apply: () => Promise.resolve({ changes: 0, drift: [] }),
      inspect: () => Promise.resolve({ mode: "quick", drift: [], durationMs: 0 }),
      repair: () => Promise.resolve({ drift: [], repaired: 0, rebuilt: false, full: false, durationMs: 0 }),
      verify: () => Promise.resolve({ drift: [], repaired: 0, rebuilt: false, full: false, durationMs: 0 }),
      verified: () => new Set(),
      fullReadMs: () => undefined,
      watch: () => undefined,
      unwatch: () => undefined,
      services: () => Promise.resolve(0),
      counters: () => Promise.resolve([]),
    };
    const reconciler = new Reconciler({
      config,
      view: { synced: () => true, services: () => [...services], slices: (): V1EndpointSlice[] => [] },
      engine,
      localVips: {
        apply: () => Promise.resolve(0),
        verify: () => Promise.resolve({ drift: [], repaired: 0, rebuilt: false, full: true, durationMs: 0 }),
        verified: () => new Set(),
      } as unknown as LocalVips,
      metrics: new ControllerMetrics(),
      log: pino({ level: "silent" }),
      report: (problems) => Promise.resolve(void reports.push(problems)),
      writeStatus: (svc, vips) =>
        Promise.resolve(void writes.push(`${svc.metadata!.name}=${vips.join(",")}`)),
      isLeader: () => true,
    });

    await reconciler.reconcileOnce();
    // The watch has not delivered the written status yet: the same objects, nothing written again.
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1"]);
    expect(reports.map((r) => r.map((p) => p.reason))).toEqual([["VipOutsidePools"], ["VipOutsidePools"]]);

    // The write arrives (a new object): allocation runs again and finds nothing to write.
    services = [lbService("new", { vips: ["10.1.1.1"] }), services[1]!];
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1"]);
    // A new Service: allocated.
    services = [...services, lbService("newer")];
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1", "newer=10.1.1.2"]);
  });
});
