// The reconciler against a fake cluster view and data plane: what it skips when nothing changed,
// and how it writes allocations.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import { pino } from "pino";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import type { LocalVips } from "../dataplane/localVips.ts";
import { serviceKey, type VirtualService } from "../dataplane/model.ts";
import { idleEngine, idleLocalVips } from "../dataplane/testing/idleDataPlane.ts";
import type { SkippedItem } from "./desiredState.ts";
import type { EventType, ReportOptions } from "./eventSink.ts";
import { ControllerMetrics } from "./metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { CLASS, lbService, slice } from "./testing/k8sObjects.ts";

const config = lbConfigSchema.parse({
  loadBalancerClass: CLASS,
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});

/** A reconciler over `services()`, recording writes, data-plane applies and Events. */
function fixture(
  services: () => V1Service[],
  writeStatus: (svc: V1Service, vips: string[]) => Promise<void>,
  retryMs = 3_600_000, // by default the tests run the retries themselves
  lbConfig = config,
  writeFinalizer?: (svc: V1Service, present: boolean) => Promise<void>,
) {
  const applies: number[] = [];
  const events: { type: EventType; reason: string; object: string; uid?: string | undefined }[] = [];
  const metrics = new ControllerMetrics();
  const engine = idleEngine((s) => applies.push(s.length));
  const reconciler = new Reconciler({
    config: lbConfig,
    view: { synced: () => true, services: () => [...services()], slices: (): V1EndpointSlice[] => [] },
    engine,
    localVips: idleLocalVips(),
    metrics,
    log: pino({ level: "silent" }),
    report: (items: SkippedItem[], type: EventType = "Warning") =>
      Promise.resolve(
        void events.push(...items.map(({ object, uid, reason }) => ({ type, reason, object, uid }))),
      ),
    writeStatus,
    ...(writeFinalizer && { writeFinalizer }),
    isLeader: () => true,
    retryMs,
  });
  return { reconciler, applies, events, metrics };
}

describe("Reconciler", () => {
  it("allocates again only when the Services changed, and reports the allocation's problems every run", async () => {
    let services: V1Service[] = [
      lbService("new", { uid: "u-new" }),
      lbService("outside", { annotations: { "portable-lb.io/load-balancer-ips": "192.0.2.1" } }),
    ];
    const writes: string[] = [];
    const { reconciler, events } = fixture(
      () => services,
      (svc, vips) => Promise.resolve(void writes.push(`${svc.metadata!.name}=${vips.join(",")}`)),
    );

    await reconciler.reconcileOnce();
    // The watch has not delivered the written status yet: the same objects, nothing written again.
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1"]);
    expect(events).toEqual([
      { type: "Warning", reason: "VipOutsidePools", object: "default/outside", uid: undefined },
      // Once written, the allocation is told on the Service, with its uid (kubectl describe needs it).
      { type: "Normal", reason: "VipAllocated", object: "default/new", uid: "u-new" },
      { type: "Warning", reason: "VipOutsidePools", object: "default/outside", uid: undefined },
    ]);

    // The write arrives (a new object): allocation runs again and finds nothing to write.
    services = [lbService("new", { vips: ["10.1.1.1"] }), services[1]!];
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1"]);
    // A new Service: allocated.
    services = [...services, lbService("newer")];
    await reconciler.reconcileOnce();
    expect(writes).toEqual(["new=10.1.1.1", "newer=10.1.1.2"]);
    reconciler.stop();
  });

  it("applies the data plane when status writes fail (409, 403, API down), counts them and retries", async () => {
    const services = [lbService("serving", { vips: ["10.1.1.9"] }), lbService("new")];
    let down = true;
    const writes: string[] = [];
    const { reconciler, applies, events, metrics } = fixture(
      () => services,
      (svc, vips) =>
        down
          ? Promise.reject(new Error("connect ECONNREFUSED"))
          : Promise.resolve(void writes.push(`${svc.metadata!.name}=${vips.join(",")}`)),
    );
    await reconciler.reconcileOnce();
    expect(applies).toEqual([1]); // "serving" is programmed all the same
    expect((await metrics.statusWriteErrors.get()).values[0]!.value).toBe(1);
    expect(events.filter((e) => e.type === "Normal")).toEqual([]); // nothing happened yet
    // The same Services again (no watch event): the write is retried all the same.
    down = false;
    await reconciler.reconcileOnce();
    expect(applies).toEqual([1, 1]);
    expect(writes).toEqual(["new=10.1.1.1"]);
    expect(events.filter((e) => e.type === "Normal").map((e) => e.reason)).toEqual(["VipAllocated"]);
    reconciler.stop();
  });

  it("retries a failed status write by itself, with no change in the cluster to wake it", async () => {
    let attempts = 0;
    let landed: (write: string) => void;
    const written = new Promise<string>((resolve) => (landed = resolve));
    const { reconciler } = fixture(
      () => [lbService("new")],
      (svc, vips) => {
        if (++attempts <= 2) return Promise.reject(new Error("403 Forbidden"));
        landed(`${svc.metadata!.name}=${vips.join(",")}`);
        return Promise.resolve();
      },
      50,
    );
    reconciler.trigger();
    const timeout = new Promise<string>((resolve) =>
      setTimeout(() => resolve("no write in 5 s"), 5_000).unref(),
    );
    const result = await Promise.race([written, timeout]);
    reconciler.stop();
    expect({ result, attempts }).toEqual({ result: "new=10.1.1.1", attempts: 3 });
  });

  describe("the cleanup finalizer", () => {
    const FINALIZER = "service.kubernetes.io/load-balancer-cleanup";
    const finalized = (svc: V1Service, more: Partial<V1Service["metadata"]> = {}): V1Service => ({
      ...svc,
      metadata: {
        ...svc.metadata,
        finalizers: ["example.com/other", FINALIZER],
        annotations: { ...svc.metadata?.annotations, "portable-lb.io/cleanup-finalizer-owner": CLASS },
        ...more,
      },
    });
    const recorder = () => {
      const writes: string[] = [];
      return {
        writes,
        status: (svc: V1Service, vips: string[]) =>
          Promise.resolve(void writes.push(`status ${svc.metadata!.name}=${vips.join(",")}`)),
        finalizer: (svc: V1Service, present: boolean) =>
          Promise.resolve(void writes.push(`finalizer ${svc.metadata!.name}${present ? "+" : "-"}`)),
      };
    };

    it("is added after the address is written, and removed once the type changed", async () => {
      let services = [lbService("web", { uid: "u-web" })];
      const w = recorder();
      const { reconciler, events, applies } = fixture(
        () => services,
        w.status,
        undefined,
        config,
        w.finalizer,
      );
      await reconciler.reconcileOnce();
      expect(w.writes).toEqual(["status web=10.1.1.1", "finalizer web+"]);
      // Served with both: nothing more to write.
      services = [finalized(lbService("web", { uid: "u-web", vips: ["10.1.1.1"] }))];
      await reconciler.reconcileOnce();
      expect(w.writes).toHaveLength(2);
      // Now a ClusterIP Service (its status cleared by the API server): no longer served, the
      // finalizer removed.
      const svc = services[0]!;
      services = [{ ...svc, spec: { ...svc.spec, type: "ClusterIP" }, status: {} }];
      await reconciler.reconcileOnce();
      expect(w.writes.slice(2)).toEqual(["finalizer web-"]);
      expect(applies.at(-1)).toBe(0);
      expect(events.filter((e) => e.reason === "VipReleased")).toEqual([
        { type: "Normal", reason: "VipReleased", object: "default/web", uid: "u-web" },
      ]);
      reconciler.stop();
    });

    it("releases a Service being deleted at once, and gives its address to another only once it is gone", async () => {
      const deleting = finalized(lbService("old", { vips: ["10.1.1.1"] }), {
        deletionTimestamp: new Date("2026-01-02T00:00:00Z"),
      });
      const asking = lbService("new", { annotations: { "portable-lb.io/load-balancer-ips": "10.1.1.1" } });
      let services = [deleting, asking];
      const w = recorder();
      const { reconciler, applies } = fixture(() => services, w.status, undefined, config, w.finalizer);
      await reconciler.reconcileOnce();
      // Not served any more (the data plane has nothing), its finalizer removed; no status write for
      // the object going away, and none yet for the address it still holds.
      expect(applies).toEqual([0]);
      expect(w.writes).toEqual(["finalizer old-", "finalizer new+"]);
      // The watch shows it gone: the address is written to the Service asking for it.
      services = [finalized(asking)];
      await reconciler.reconcileOnce();
      expect(w.writes.slice(2)).toEqual(["status new=10.1.1.1"]);
      reconciler.stop();
    });

    it("clears the status of a classless Service once serveClassless is off, then removes the finalizer, retrying", async () => {
      // Served as the cluster's default before; a LoadBalancer Service still, so its status stays
      // until cleared, for another load balancer to serve it.
      const svc = finalized(lbService("web", { vips: ["10.1.1.1"] }));
      const services = [{ ...svc, spec: { ...svc.spec, loadBalancerClass: undefined } }];
      let down = true;
      const writes: string[] = [];
      const { reconciler, metrics } = fixture(
        () => services,
        (_svc, vips) =>
          down
            ? Promise.reject(new Error("503"))
            : Promise.resolve(void writes.push(`status ${vips.join(",")}`)),
        undefined,
        config,
        (_svc, present) => Promise.resolve(void writes.push(`finalizer ${present ? "+" : "-"}`)),
      );
      await reconciler.reconcileOnce();
      expect(writes).toEqual([]);
      expect((await metrics.statusWriteErrors.get()).values[0]!.value).toBe(1);
      down = false;
      await reconciler.reconcileOnce();
      expect(writes).toEqual(["status ", "finalizer -"]);
      reconciler.stop();
    });
  });

  it("writes an address to its new owner only after the old owner's write gave it up", async () => {
    const ask = (ips: string) => ({ annotations: { "portable-lb.io/load-balancer-ips": ips } });
    // "mover" gives up .5 for .6 and the older "taker" gets .5 in the same allocation, which lists
    // the taker first.
    const services = [
      lbService("mover", { vips: ["10.1.1.5"], created: "2026-01-02T00:00:00Z", ...ask("10.1.1.6") }),
      lbService("taker", { vips: ["10.1.1.7"], created: "2026-01-01T00:00:00Z", ...ask("10.1.1.5") }),
    ];
    const attempts: string[] = [];
    let failMover = true;
    const { reconciler } = fixture(
      () => services,
      (svc, vips) => {
        attempts.push(`${svc.metadata!.name}=${vips.join(",")}`);
        return svc.metadata!.name === "mover" && failMover
          ? Promise.reject(new Error("409"))
          : Promise.resolve();
      },
    );
    await reconciler.reconcileOnce();
    // The mover's write failed: .5 is still in its status, so the taker's write waits.
    expect(attempts).toEqual(["mover=10.1.1.6"]);
    failMover = false;
    await reconciler.reconcileOnce();
    // Within one run too, the taker is written once the mover's write has landed.
    expect(attempts).toEqual(["mover=10.1.1.6", "mover=10.1.1.6", "taker=10.1.1.5"]);
    reconciler.stop();
  });

  it("tells a classless LoadBalancer Service still without an address how to get one from portable-lb", async () => {
    const classless = {
      ...lbService("plain", { uid: "u-plain" }),
      spec: { type: "LoadBalancer", ports: [{ port: 80 }] },
    };
    const servedElsewhere = {
      ...classless,
      metadata: { ...classless.metadata, name: "other", uid: "u-other" },
      status: { loadBalancer: { ingress: [{ ip: "203.0.113.4" }] } },
    };
    const { reconciler, events } = fixture(
      () => [classless, servedElsewhere, lbService("othersClass", { class: "example.com/lb" })],
      () => Promise.resolve(),
    );
    await reconciler.reconcileOnce();
    expect(events).toEqual([
      { type: "Normal", reason: "NoLoadBalancerClass", object: "default/plain", uid: "u-plain" },
    ]);
    reconciler.stop();
  });

  it("serves classless LoadBalancer Services as the cluster's default where serveClassless says so, never another class's", async () => {
    const classless = {
      ...lbService("plain", { uid: "u-plain" }),
      spec: { type: "LoadBalancer", ports: [{ port: 80 }] },
    };
    const writes: string[] = [];
    const { reconciler, events } = fixture(
      () => [classless, lbService("othersClass", { class: "example.com/lb" }), lbService("ours")],
      (svc, vips) => Promise.resolve(void writes.push(`${svc.metadata!.name}=${vips.join(",")}`)),
      undefined,
      { ...config, serveClassless: true },
    );
    await reconciler.reconcileOnce();
    expect(writes.sort()).toEqual(["ours=10.1.1.1", "plain=10.1.1.2"]);
    // No hint to go elsewhere: it is served here.
    expect(events.filter((e) => e.reason === "NoLoadBalancerClass")).toEqual([]);
    reconciler.stop();
  });
});

describe("Reconciler and the announce annotation", () => {
  /**
   * A reconciler over `services()` whose data plane verifies whatever it applied (`apply` may fail
   * it), recording what it hands the announcer, the rules applied and the Events.
   */
  function serving(services: () => V1Service[], o: { leader?: boolean; failApply?: () => boolean } = {}) {
    let rules: VirtualService[] = [];
    let routes: string[] = [];
    const engine: DataPlaneEngine = {
      ...idleEngine(),
      apply: (desired) => {
        if (o.failApply?.()) return Promise.reject(new Error("nft: Operation not permitted"));
        rules = desired;
        return Promise.resolve({ changes: 0, drift: [] });
      },
      verified: () => new Set(rules.map(serviceKey)),
    };
    const localVips = {
      ...idleLocalVips(),
      apply: (vips: string[]) => {
        routes = vips;
        return Promise.resolve(0);
      },
      verified: () => new Set(routes),
    } as unknown as LocalVips;
    const announced: { vips: string[]; heldBack: string[] }[] = [];
    const events: { type: EventType; reason: string; object: string; repeat: boolean }[] = [];
    const metrics = new ControllerMetrics();
    const reconciler = new Reconciler({
      config,
      view: {
        synced: () => true,
        services: () => [...services()],
        slices: () => [slice("web", [{ ip: "10.244.0.5" }]), slice("api", [{ ip: "10.244.0.6" }])],
      },
      engine,
      localVips,
      metrics,
      log: pino({ level: "silent" }),
      report: (items: SkippedItem[], type: EventType = "Warning", opts?: ReportOptions) =>
        Promise.resolve(
          void events.push(
            ...items.map(({ object, reason }) => ({ type, reason, object, repeat: opts?.repeat ?? false })),
          ),
        ),
      pod: { object: "portable-lb-system/lb-1", kind: "Pod" },
      writeStatus: () => Promise.resolve(),
      isLeader: () => o.leader ?? true,
      announce: (vips, heldBack) => void announced.push({ vips, heldBack: [...heldBack] }),
    });
    const heldBackMetric = async () =>
      Object.fromEntries((await metrics.vipsHeldBack.get()).values.map((v) => [v.labels.reason, v.value]));
    return {
      reconciler,
      announced,
      events,
      heldBackMetric,
      vipsRuled: () => [...new Set(rules.map((r) => r.vip))].sort(),
    };
  }
  const web = (annotations?: Record<string, string>) =>
    lbService("web", { vips: ["10.1.1.1"], ...(annotations && { annotations }) });
  const api = lbService("api", { vips: ["10.1.1.2"] });

  it('keeps a Service whose announce is "false" served but hands its VIP to no announcer, and tells it', async () => {
    let services = [web({ "portable-lb.io/announce": "false" }), api];
    const f = serving(() => services);
    await f.reconciler.reconcileOnce();
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.2"], heldBack: ["10.1.1.1"] });
    expect(f.vipsRuled()).toEqual(["10.1.1.1", "10.1.1.2"]);
    expect(await f.heldBackMetric()).toEqual({ AnnounceDisabled: 1, NoReadyBackend: 0 });
    expect(f.events).toEqual([
      { type: "Normal", reason: "AnnounceDisabled", object: "default/web", repeat: true },
    ]);
    // Another run with nothing changed: nothing more to tell.
    await f.reconciler.reconcileOnce();
    expect(f.events).toHaveLength(1);

    services = [web(), api];
    await f.reconciler.reconcileOnce();
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.1", "10.1.1.2"], heldBack: [] });
    expect(await f.heldBackMetric()).toEqual({ AnnounceDisabled: 0, NoReadyBackend: 0 });
    expect(f.events.at(-1)).toEqual({
      type: "Normal",
      reason: "AnnounceEnabled",
      object: "default/web",
      repeat: true,
    });
    f.reconciler.stop();
  });

  it("hands a change of the annotation on at once, even when the data plane's run then fails", async () => {
    let services = [web(), api];
    let failing = false;
    const f = serving(() => services, { failApply: () => failing });
    await f.reconciler.reconcileOnce();
    expect(f.announced.at(-1)!.vips).toEqual(["10.1.1.1", "10.1.1.2"]);
    failing = true;
    services = [web({ "portable-lb.io/announce": "false" }), api];
    await expect(f.reconciler.reconcileOnce()).rejects.toThrow(/Operation not permitted/);
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.2"], heldBack: ["10.1.1.1"] });
    expect(f.events.map((e) => e.reason)).toEqual(["AnnounceDisabled"]);
    f.reconciler.stop();
  });

  it("never announces a held-back VIP again when its Service goes, even before the run that removes its rules", async () => {
    let services = [web({ "portable-lb.io/announce": "false" }), api];
    let failing = false;
    const f = serving(() => services, { failApply: () => failing });
    await f.reconciler.reconcileOnce();
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.2"], heldBack: ["10.1.1.1"] });
    // The Service is deleted (a migration's source app going): its rules stay until a run applies,
    // and this one fails, yet its VIP is handed to no announcer at any point.
    failing = true;
    services = [api];
    await expect(f.reconciler.reconcileOnce()).rejects.toThrow(/Operation not permitted/);
    expect(f.announced.every((a) => !a.vips.includes("10.1.1.1"))).toBe(true);
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.2"], heldBack: [] });
    failing = false;
    await f.reconciler.reconcileOnce();
    expect(f.announced.every((a) => !a.vips.includes("10.1.1.1"))).toBe(true);
    f.reconciler.stop();
  });

  it("takes a bad value as bad input: a Warning every run, and the VIP announced", async () => {
    const f = serving(() => [web({ "portable-lb.io/announce": "off" }), api]);
    await f.reconciler.reconcileOnce();
    await f.reconciler.reconcileOnce();
    expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.1", "10.1.1.2"], heldBack: [] });
    expect(f.events).toEqual([
      { type: "Warning", reason: "InvalidAnnounce", object: "default/web", repeat: false },
      { type: "Warning", reason: "InvalidAnnounce", object: "default/web", repeat: false },
    ]);
    f.reconciler.stop();
  });

  it("tells bad input once for the cluster, from the allocator, not once per LB pod", async () => {
    const services = () => [web({ "portable-lb.io/announce": "off" }), api];
    const leader = serving(services);
    const other = serving(services, { leader: false });
    await leader.reconciler.reconcileOnce();
    await other.reconciler.reconcileOnce();
    expect(leader.events).toEqual([
      { type: "Warning", reason: "InvalidAnnounce", object: "default/web", repeat: false },
    ]);
    expect(other.events).toEqual([]);
    // Both serve as without the bad value.
    for (const f of [leader, other])
      expect(f.announced.at(-1)).toEqual({ vips: ["10.1.1.1", "10.1.1.2"], heldBack: [] });
    leader.reconciler.stop();
    other.reconciler.stop();
  });

  it("tells a handover's bad accept-from out loud, from the allocator only (once for the cluster)", async () => {
    const services = () => [web({ "portable-lb.io/handover-accept-from": "192.168.100.11,lb1" }), api];
    const leader = serving(services);
    const other = serving(services, { leader: false });
    await leader.reconciler.reconcileOnce();
    await other.reconciler.reconcileOnce();
    expect(leader.events).toEqual([
      { type: "Warning", reason: "InvalidHandover", object: "default/web", repeat: false },
    ]);
    expect(other.events).toEqual([]);
    // Announced as without it.
    expect(leader.announced.at(-1)!.vips).toEqual(["10.1.1.1", "10.1.1.2"]);
    leader.reconciler.stop();
    other.reconciler.stop();
  });
});
