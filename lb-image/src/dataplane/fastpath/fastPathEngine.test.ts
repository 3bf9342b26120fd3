import pino from "pino";
import { Registry } from "prom-client";
import { idleEngine } from "../testing/idleDataPlane.ts";
import type { VirtualService } from "../model.ts";
import type { FastPath, FastPathService, FastPathStats } from "./fastPath.ts";
import { FastPathEngine } from "./fastPathEngine.ts";

const log = pino({ level: "silent" });

const service = (vip: string, more: Partial<VirtualService> = {}): VirtualService => ({
  vip,
  port: 80,
  protocol: "tcp",
  scheduler: "mh",
  forwarding: "dsr",
  backends: [{ ip: "10.244.1.5", port: 80, weight: 1 }],
  ...more,
});

/** A loader as the engine sees one: what it was told, in order with the kernel path's applies. */
class LoaderDouble {
  readonly calls: string[];
  drift: string[] = [];
  flows: Record<string, number> = {};
  exit: ((error: Error) => void) | undefined;
  closed = false;
  constructor(calls: string[]) {
    this.calls = calls;
  }
  sync(services: FastPathService[]) {
    this.calls.push(`sync ${services.map((s) => s.vip).join(",")}`);
    return Promise.resolve({ changes: services.length });
  }
  check() {
    this.calls.push("check");
    return Promise.resolve({ drift: this.drift });
  }
  stats(): Promise<FastPathStats> {
    return Promise.resolve({ forwarded: 0, passed: {}, flows: this.flows });
  }
  onExit(cb: (error: Error) => void) {
    this.exit = cb;
  }
  close() {
    this.closed = true;
    return Promise.resolve();
  }
}

function rig(starts: ((calls: string[]) => LoaderDouble)[]) {
  const calls: string[] = [];
  const problems: string[] = [];
  const registry = new Registry();
  const inner = idleEngine((desired) => calls.push(`apply ${desired.map((s) => s.vip).join(",")}`));
  inner.counters = () => Promise.resolve([{ vip: "10.1.1.10", port: 80, protocol: "tcp", connections: 3 }]);
  let started = 0;
  const engine = new FastPathEngine(inner, {
    start: () => {
      const next = starts[started++];
      return next ? Promise.resolve(next(calls) as unknown as FastPath) : Promise.reject(new Error("no tcx"));
    },
    log,
    registry,
    onProblem: (m) => problems.push(m),
    retryMs: { first: 20, max: 40 },
  });
  const up = async () => (await registry.getSingleMetric("portable_lb_fast_path_up")!.get()).values[0]!.value;
  return { engine, calls, problems, up, started: () => started };
}

const settle = () => new Promise((r) => setTimeout(r, 0));
const waitFor = async (what: () => boolean) => {
  for (let i = 0; i < 100 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(what()).toBe(true);
};

describe("the nftables engine with the fast path in front", () => {
  it("hands the fast path each new plan after the kernel path has it, and nothing when nothing changed", async () => {
    let loader!: LoaderDouble;
    const r = rig([(calls) => (loader = new LoaderDouble(calls))]);
    await settle();
    await r.engine.apply([service("10.1.1.10")]);
    await r.engine.apply([service("10.1.1.10")]);
    await r.engine.apply([service("10.1.1.10"), service("10.1.1.11")]);
    expect(r.calls).toEqual([
      "apply 10.1.1.10",
      "sync 10.1.1.10",
      "apply 10.1.1.10",
      "apply 10.1.1.10,10.1.1.11",
      "sync 10.1.1.10,10.1.1.11",
    ]);
    expect(await r.up()).toBe(1);
    await r.engine.stop();
    expect(loader.closed).toBe(true);
  });

  it("takes a service off the fast path before the kernel path restricts it to source ranges", async () => {
    const r = rig([(calls) => new LoaderDouble(calls)]);
    await settle();
    await r.engine.apply([service("10.1.1.10"), service("10.1.1.11")]);
    r.calls.length = 0;
    await r.engine.apply([
      service("10.1.1.10"),
      service("10.1.1.11", { sourceRanges: ["10.0.0.0-10.0.0.255"] }),
    ]);
    expect(r.calls).toEqual(["sync 10.1.1.10", "apply 10.1.1.10,10.1.1.11", "sync 10.1.1.10"]);
    await r.engine.stop();
  });

  it("says why it could not start, and starts again later with the last plan", async () => {
    const r = rig([]);
    await r.engine.apply([service("10.1.1.10")]);
    await waitFor(() => r.problems.length > 0);
    expect(r.problems[0]).toMatch(
      /DSR fast path could not start: no tcx; the kernel path .* carries the DSR services/,
    );
    expect(await r.up()).toBe(0);
    await waitFor(() => r.started() >= 2);
    await r.engine.stop();
  });

  it("restarts a loader that died and gives the new one the plan", async () => {
    const loaders: LoaderDouble[] = [];
    const r = rig([0, 1].map(() => (calls: string[]) => loaders[loaders.push(new LoaderDouble(calls)) - 1]!));
    await settle();
    await r.engine.apply([service("10.1.1.10")]);
    loaders[0]!.exit!(new Error("killed"));
    expect(await r.up()).toBe(0);
    expect(r.problems).toEqual([expect.stringMatching(/its loader exited: killed/)]);
    await waitFor(() => loaders.length === 2 && r.calls.filter((c) => c === "sync 10.1.1.10").length === 2);
    expect(await r.up()).toBe(1);
    await r.engine.stop();
  });

  it("counts the fast path's new flows with the kernel path's, and reports what its checks repaired", async () => {
    let loader!: LoaderDouble;
    const r = rig([(calls) => (loader = new LoaderDouble(calls))]);
    await settle();
    await r.engine.apply([service("10.1.1.10")]);
    loader.flows = { "tcp:10.1.1.10:80": 4 };
    expect(await r.engine.counters()).toEqual([
      { vip: "10.1.1.10", port: 80, protocol: "tcp", connections: 7 },
    ]);
    loader.drift = ["maglev tcp:10.1.1.10:80 slot 3: 10.244.1.9, want 10.244.1.5"];
    r.calls.length = 0;
    expect((await r.engine.verify("changed")).drift).toEqual([]);
    const report = await r.engine.verify("quick");
    expect(r.calls).toEqual(["check"]);
    expect(report.drift).toEqual([
      expect.objectContaining({ kind: "service", detail: expect.stringMatching(/^fast path: maglev/) }),
    ]);
    expect(report.repaired).toBe(1);
    await r.engine.stop();
  });
});
