// BGP routing-convergence benchmark (issue 5): how long the upstream router's FIB takes to follow
// an LB pod's events, and how many keep-alive connections an LB joining or leaving resets.
// Real parts throughout, the topology of test/integration/ecmp.test.ts: FRR 8.4 as the router
// (its kernel FIB polled every few ms through one `ip -batch` process), two BIRD route reflectors
// with portable-lb's config, three nodes, three LB pods running the image's controller and speaker
// commands, a local control plane of its own. Reflectors and LB pods run as the pods portable-lb
// renders (their user, capabilities, read-only root and volumes), so BFD works here only if it
// works as deployed.
//
//   npm run bench:bgp -- [--events 200] [--kinds kill,stop,linkdown,hang] [--resets 20] [--seed S]
//                        [--poll-ms 10] [--bfd-ms 50] [--mode dsr|snat] [--out DIR]
//
// Events, per kind at least --events, in a seeded random order, each on one LB pod (the three
// pods' sequences run side by side, so each pod's node is watched on its own), timed from the
// action to the first poll of the router's FIB that shows it:
//   kill     SIGKILL of the speaker container          → its node leaves the route
//   start    the speaker container starts (after kill)  → its node joins the route
//   stop     graceful: preStop (withdraw), then SIGTERM → its node leaves
//   linkdown the node's uplink goes down               → its node leaves
//   hang     SIGSTOP of BIRD (a hung speaker)          → its node leaves (BFD)
// Every event starts from the state where the router's paths through the pod it acts on are all
// protected by BFD: the pod has a BGP session Established to each reflector, BFD Up to each, and
// its VIP exported on each session; the router has BFD Up with each reflector and the pod's path
// from each (bounded wait; an event that never gets there is skipped and counted). A link-down on
// a reflector's node cuts that reflector off the router too, so the router's side counts. After
// each event the pod is restored; the time until it is protected again is reported per kind too. A leave that took at
// least hold time - keepalive (or was never seen) fell back to the BGP hold timer: BFD did not
// catch it; those are counted per kind (target: none).
// Then the reset part: 60 keep-alive connections, a request every 50 ms each, while one LB pod
// leaves and joins --resets times, in the data-plane mode --mode: "dsr" (the backends prepared by
// the node agent's DSR applier, run as the agent runs it) or "snat" (--events 0 runs only this
// part, e.g. once per mode for the two side by side). Writes summary.json, samples.csv, report.txt and a histogram
// like the ECMP paper's Fig. 13(c) (delays.png) under bench/results/bgp-<time>/.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import type { LbConfigInput } from "@portable-lb/core/config";
import { EcmpLab, nodeIp, nodeName, podIp, POD_CIDR } from "../test/harness/netns/ecmpLab.ts";
import { startHttpEcho } from "../test/harness/netns/httpClient.ts";
import { loadAcross } from "../test/harness/netns/loadAcross.ts";
import { LbPod } from "../test/harness/netns/lbPod.ts";
import { waitUntil } from "@portable-lb/lab";
import { createLbService } from "../test/harness/lbServices.ts";
import { benchControlPlane, progress } from "./lib/benchSetup.ts";
import { writeChart } from "./lib/charts.ts";
import { FibPoller } from "./lib/fibPoller.ts";
import { countCodes } from "./lib/loadClient.ts";
import { machineInfo } from "./lib/report.ts";
import { seededRandom, summarize } from "./lib/stats.ts";
import { Teardown } from "./lib/teardown.ts";

// This file's folder (no import.meta: the repository's TypeScript builds as CommonJS).
const BENCH_DIR = dirname(resolve(process.argv[1]!));
const NS = "plb-bench-bgp";
const ASN = 64512;
const POOL = "10.1.2.0/24";
const VIP = "10.1.2.1";
/** The Service's port and the backends' (equal: direct server return cannot remap ports). */
const PORT = 8080;
const MODES = ["dsr", "snat"] as const;
const CLASS = "portable-lb.io/bench-bgp";
const NODES = [1, 2, 3];
/** BGP timers of every daemon: BFD every `bfdMs` × 3 (the LB config's default is 300 ms). */
const timingOf = (bfdMs: number) => ({
  bfd: { minRxMs: bfdMs, minTxMs: bfdMs, multiplier: 3 },
  timers: { holdTimeS: 9, keepaliveS: 3 },
  gracefulRestartS: 120,
});
type Timing = ReturnType<typeof timingOf>;
const EVENT_KINDS = ["kill", "stop", "linkdown", "hang"] as const;
type EventKind = (typeof EVENT_KINDS)[number];
type Kind = EventKind | "start";
const EVENT_TIMEOUT_MS = 10_000;
const RESTORE_TIMEOUT_MS = 30_000;
const STEADY_TIMEOUT_MS = 30_000;
const TARGET = { p50Ms: 300, p99Ms: 1_000 };

interface Recovery {
  kind: EventKind;
  /** Undefined: the pod was not protected by BFD again within STEADY_TIMEOUT_MS. */
  ms: number | undefined;
}

/** A leave BFD did not catch: it took at least hold time - keepalive, or was never seen. */
const holdTimerFallback = (s: Sample, timing: Timing) =>
  s.kind !== "start" &&
  (s.ms === undefined || s.ms >= (timing.timers.holdTimeS - timing.timers.keepaliveS) * 1000);

interface Sample {
  kind: Kind;
  node: number;
  /** Undefined: the FIB did not show it within EVENT_TIMEOUT_MS. */
  ms: number | undefined;
}

function options() {
  const { values } = parseArgs({
    options: {
      events: { type: "string", default: "200" },
      kinds: { type: "string", default: EVENT_KINDS.join(",") },
      resets: { type: "string", default: "20" },
      seed: { type: "string", default: "1" },
      "poll-ms": { type: "string", default: "10" },
      "bfd-ms": { type: "string", default: "50" },
      mode: { type: "string", default: "dsr" },
      out: { type: "string", default: join(BENCH_DIR, "results") },
    },
  });
  const kinds = values.kinds.split(",").map((k) => k.trim());
  const unknown = kinds.filter((k) => !(EVENT_KINDS as readonly string[]).includes(k));
  if (unknown.length)
    throw new Error(`--kinds: unknown ${unknown.join(",")}; give some of ${EVENT_KINDS.join(",")}`);
  const events = Number(values.events);
  if (!Number.isInteger(events) || events < 0)
    throw new Error(`--events: a whole number, 0 for only the reset part (got ${values.events})`);
  const mode = values.mode as (typeof MODES)[number];
  if (!MODES.includes(mode)) throw new Error(`--mode: one of ${MODES.join(", ")} (got ${values.mode})`);
  return {
    events,
    kinds: kinds as EventKind[],
    resets: Number(values.resets),
    seed: Number(values.seed),
    pollMs: Number(values["poll-ms"]),
    bfdMs: Number(values["bfd-ms"]),
    mode,
    out: values.out,
  };
}

function shuffled<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

class Bench {
  readonly ecmp: EcmpLab;
  readonly poller: FibPoller;
  readonly pods: Map<number, LbPod>;
  /** Per restore: ms from the restoring action until the pod is protected by BFD again. */
  readonly recoveries: Recovery[] = [];
  /** Events skipped because their pod never got protected by BFD first, per kind. */
  readonly unsteady: Partial<Record<EventKind, number>> = {};

  constructor(ecmp: EcmpLab, poller: FibPoller, pods: Map<number, LbPod>) {
    this.ecmp = ecmp;
    this.poller = poller;
    this.pods = pods;
  }

  /** Milliseconds from the start of `action` to the first poll where `node` is in (or out of) the route. */
  async timed(node: number, joins: boolean, action: () => unknown, timeoutMs = EVENT_TIMEOUT_MS) {
    const gw = nodeIp(node);
    const start = performance.now();
    const seen = this.poller.waitFor((hops) => hops.includes(gw) === joins, timeoutMs);
    await action();
    const at = await seen;
    return at === undefined ? undefined : at - start;
  }

  /**
   * One event on `node` and its restore; the samples it gives (kill gives a start too). None when
   * the pod was not protected by BFD in time: an event from there would measure the hold timer.
   */
  async event(kind: EventKind, node: number): Promise<Sample[]> {
    const lb = this.pods.get(node)!;
    const sample = (k: Kind, ms: number | undefined): Sample => ({ kind: k, node, ms });
    if (!(await this.steady(node))) {
      this.unsteady[kind] = (this.unsteady[kind] ?? 0) + 1;
      return [];
    }
    switch (kind) {
      case "kill": {
        const down = await this.timed(node, false, () => lb.speaker!.signal("SIGKILL", 5_000));
        const up = await this.timed(node, true, () => lb.startSpeaker(), RESTORE_TIMEOUT_MS);
        await this.steady(node);
        return [sample("kill", down), sample("start", up)];
      }
      case "stop": {
        const down = await this.timed(node, false, () => lb.stopGracefully());
        await this.restore(node, kind, () => lb.start());
        return [sample("stop", down)];
      }
      case "linkdown": {
        const down = await this.timed(node, false, () => this.ecmp.uplinkDown(node));
        await this.restore(node, kind, () => this.ecmp.uplinkUp(node));
        return [sample("linkdown", down)];
      }
      case "hang": {
        const bird = await lb.birdPid();
        const down = await this.timed(node, false, () => process.kill(bird, "SIGSTOP"));
        await this.restore(node, kind, () => process.kill(bird, "SIGCONT"));
        return [sample("hang", down)];
      }
    }
  }

  async restore(node: number, kind: EventKind, action: () => unknown): Promise<void> {
    const start = performance.now();
    const ms = await this.timed(node, true, action, RESTORE_TIMEOUT_MS);
    if (ms === undefined)
      progress(`  node ${node}: not back in the route ${RESTORE_TIMEOUT_MS / 1000} s after a restore`);
    const up = await this.steady(node);
    this.recoveries.push({ kind, ms: up ? performance.now() - start : undefined });
  }

  /**
   * Waits until the router's paths through the pod are all protected by BFD (EcmpLab.pathsProtected):
   * each event starts from there, not from a state where a session still relies on the 9 s hold timer.
   */
  async steady(node: number): Promise<boolean> {
    const lb = this.pods.get(node)!;
    const up = await waitUntil(() => this.ecmp.pathsProtected(node, lb, VIP), STEADY_TIMEOUT_MS, 50);
    if (!up) progress(`  node ${node}: not protected by BFD within ${STEADY_TIMEOUT_MS / 1000} s`);
    return up;
  }
}

/**
 * Connections an LB leaving or joining resets. Each event gets a fresh set of connections (new
 * source ports, so new ECMP hashes): one long run would measure survivors, since a reset connection
 * reopens on a random hash and, after a few events, only connections ECMP never moves are left.
 */
async function resetRun(
  b: Bench,
  resets: number,
): Promise<{
  requests: number;
  connections: number;
  events: { kind: "leave" | "join"; at: number; resets: number; errors: Record<string, number> }[];
}> {
  const CONNECTIONS = 60;
  const lb = b.pods.get(3)!;
  const events: { kind: "leave" | "join"; at: number; resets: number; errors: Record<string, number> }[] = [];
  let requests = 0;
  /** Opens the connections, lets them settle, runs the event, and counts the connections it reset. */
  const underLoad = async (kind: "leave" | "join", event: () => Promise<unknown>) => {
    const { at, results } = await loadAcross(
      b.ecmp.client.netns,
      { kept: { urls: [`http://${VIP}:${PORT}/`], connections: CONNECTIONS, intervalMs: 50 } },
      event,
    );
    requests += results.kept.requests;
    const failed = results.kept.failures.filter((f) => f.t >= at);
    const reset = new Set(failed.map((f) => f.connection));
    // What the client saw, counted: who ended the connections.
    events.push({ kind, at, resets: reset.size, errors: countCodes(failed) });
  };
  for (let i = 0; i < resets; i++) {
    progress(`  resets: leave and join ${i + 1}/${resets}`);
    await underLoad("leave", () => b.timed(3, false, () => lb.stopGracefully()));
    await underLoad("join", () => b.timed(3, true, () => lb.start(), RESTORE_TIMEOUT_MS));
  }
  return { requests, connections: CONNECTIONS, events };
}

type KindSummary = ReturnType<typeof summarize> & {
  timeouts: number;
  /** Leaves BFD did not catch (holdTimerFallback). */
  holdTimerFallbacks: number;
  /** Events not run: their pod was not protected by BFD in time. */
  skipped: number;
};

function report(
  mode: string,
  timing: Timing,
  machine: Awaited<ReturnType<typeof machineInfo>>,
  samples: Sample[],
  pollGaps: number[],
  resets: Awaited<ReturnType<typeof resetRun>> | undefined,
  recoveries: Recovery[],
  unsteady: Partial<Record<EventKind, number>>,
): { text: string; byKind: Record<string, KindSummary> } {
  const byKind: Record<string, KindSummary> = {};
  const lines = [
    "portable-lb BGP convergence: LB pod event -> upstream router's FIB (FRR 8.4, kernel route polled)",
    `machine: ${machine.cpus} x ${machine.cpuModel}; kernel ${machine.kernel}`,
    `settings: BFD ${timing.bfd.minRxMs} ms x ${timing.bfd.multiplier}, hold ${timing.timers.holdTimeS} s, ` +
      `keepalive ${timing.timers.keepaliveS} s; 3 LB pods, 2 route reflectors; data plane ${mode}`,
  ];
  const gaps = summarize(pollGaps);
  lines.push(
    `FIB poll interval: p50 ${gaps.p50.toFixed(1)} ms, p99 ${gaps.p99.toFixed(1)} ms (${gaps.count} polls)`,
    "",
  );
  lines.push(
    "kind       events  p50 ms  p90 ms  p99 ms  max ms  timeouts  hold-timer  skipped  target (p50 < 300, p99 < 1000, no hold timer)",
  );
  for (const kind of ["start", ...EVENT_KINDS] as Kind[]) {
    const mine = samples.filter((s) => s.kind === kind);
    if (mine.length === 0) continue;
    const ok = mine.flatMap((s) => (s.ms === undefined ? [] : [s.ms]));
    const s: KindSummary = {
      ...summarize(ok),
      timeouts: mine.length - ok.length,
      holdTimerFallbacks: mine.filter((x) => holdTimerFallback(x, timing)).length,
      skipped: kind === "start" ? 0 : (unsteady[kind] ?? 0),
    };
    byKind[kind] = s;
    const pass =
      s.timeouts === 0 && s.holdTimerFallbacks === 0 && s.p50 < TARGET.p50Ms && s.p99 < TARGET.p99Ms;
    lines.push(
      [
        kind.padEnd(9),
        String(mine.length).padStart(7),
        ...[s.p50, s.p90, s.p99, s.max].map((x) => x.toFixed(0).padStart(7)),
        String(s.timeouts).padStart(9),
        String(s.holdTimerFallbacks).padStart(11),
        String(s.skipped).padStart(8),
        `  ${pass ? "PASS" : "FAIL"}`,
      ].join(" "),
    );
  }
  lines.push("", "histogram (events per 100 ms bin; cf. the ECMP paper's Fig. 13(c))");
  const kinds = Object.keys(byKind) as Kind[];
  lines.push(`bin ms     ${kinds.map((k) => k.padStart(9)).join("")}`);
  for (let lo = 0; lo < 1_000; lo += 100) {
    const counts = kinds.map(
      (k) =>
        samples.filter(
          (x) => x.kind === k && x.ms !== undefined && x.ms >= lo && (lo === 900 || x.ms < lo + 100),
        ).length,
    );
    lines.push(
      `${`${lo}-${lo === 900 ? "" : lo + 100}`.padEnd(10)} ${counts.map((c) => String(c).padStart(9)).join("")}`,
    );
  }
  // A BFD session left Up on a restarted peer's old discriminator shows here as ~3 s (three 1 s
  // idle intervals) and then resets the BGP session that came back (lb-image/bird/bfd-peer-session-restart.patch).
  lines.push(
    "",
    "after each restore, until the router's paths through the pod are protected by BFD again:",
    "kind     restores  p50 ms  p99 ms  max ms  over 2 s  not up",
  );
  for (const kind of EVENT_KINDS) {
    const mine = recoveries.filter((r) => r.kind === kind);
    if (mine.length === 0) continue;
    const ok = mine.flatMap((r) => (r.ms === undefined ? [] : [r.ms]));
    const s = summarize(ok);
    lines.push(
      [
        kind.padEnd(9),
        String(mine.length).padStart(7),
        ...[s.p50, s.p99, s.max].map((x) => x.toFixed(0).padStart(7)),
        String(ok.filter((ms) => ms > 2_000).length).padStart(9),
        String(mine.length - ok.length).padStart(7),
      ].join(" "),
    );
  }
  if (resets) {
    const frac = (kind: "leave" | "join") => {
      const es = resets.events.filter((e) => e.kind === kind);
      const total = es.reduce((n, e) => n + e.resets, 0);
      const kept = 100 - (100 * total) / (es.length * resets.connections);
      const errors: Record<string, number> = {};
      for (const [code, n] of es.flatMap((e) => Object.entries(e.errors)))
        errors[code] = (errors[code] ?? 0) + n;
      const seen = Object.entries(errors).map(([code, n]) => `${code} x${n}`);
      return (
        `${kind}: ${total} resets over ${es.length} events: ${kept.toFixed(1)}% of the ${resets.connections} ` +
        `connections kept per event (target with dsr: >= 99%)${seen.length ? `; errors: ${seen.join(", ")}` : ""}`
      );
    };
    lines.push(
      "",
      `connection resets under keep-alive load (${resets.requests} requests, data plane ${mode}):`,
      `  ${frac("leave")}`,
      `  ${frac("join")}`,
    );
  }
  return { text: lines.join("\n"), byKind };
}

async function main(): Promise<void> {
  const o = options();
  if (process.getuid?.() !== 0) throw new Error("the benchmark needs root (network namespaces)");
  const runDir = join(o.out, `bgp-${new Date().toISOString().replaceAll(":", "-").slice(0, 19)}`);
  mkdirSync(runDir, { recursive: true });
  const machine = await machineInfo();
  const teardown = new Teardown();
  try {
    const timing = timingOf(o.bfdMs);
    const cp = await benchControlPlane(teardown, "bench-bgp");
    progress("building the topology: router, 2 route reflectors, 3 nodes");
    const ecmp = await EcmpLab.create({
      name: "bench-bgp",
      nodes: 3,
      reflectorNodes: [1, 2],
      asn: ASN,
      vipPools: [POOL],
      ...timing,
    });
    teardown.add({ name: "topology", stop: () => ecmp.destroy(), killNow: () => undefined });
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const backends = NODES.map((n) => ({ n, name: `b${n}`, ip: podIp(n, 20), nodeName: nodeName(n) }));
    for (const b of backends) {
      const pod = await ecmp.pod(b.n, b.name, 20);
      await startHttpEcho(pod, { port: PORT, name: b.name });
      if (o.mode === "dsr") await ecmp.dsrBackend(b.n, pod, b.ip, [VIP], PORT);
    }
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await createLbService(kc, NS, "web", CLASS, backends, { port: PORT });

    const config: LbConfigInput = {
      loadBalancerClass: CLASS,
      routingMode: "bgp",
      podCidr: POD_CIDR,
      vipPools: [{ name: "web", cidr: POOL, avoidBuggyIps: true }],
      dataPlane: { engine: "nftables", mode: o.mode },
      bgp: { asn: ASN, routeReflectors: ecmp.reflectorAddresses(), ...timing },
      // The drain after a stop's withdrawal is not what this measures: its shortest quiet period
      // keeps 201 stop events from adding 10 minutes.
      drain: { quietS: 1 },
    };
    const pods = new Map<number, LbPod>();
    for (const n of NODES) {
      const name = `lb${n}`;
      const ns = await ecmp.pod(n, name, 10, { forwarding: true });
      await ecmp.nodeRoute(n, POOL, podIp(n, 10));
      const lb = await LbPod.create({
        ns,
        name,
        nodeName: nodeName(n),
        podIp: podIp(n, 10),
        nodeIp: nodeIp(n),
        config,
        dir: ecmp.lab.dir,
        kubeconfig: cp.kubeconfig,
        namespace: NS,
      });
      teardown.add({ name, stop: () => lb.destroy(), killNow: () => undefined });
      await lb.start();
      pods.set(n, lb);
    }
    const poller = new FibPoller(ecmp.routerNs.netns, `${VIP}/32`, o.pollMs);
    teardown.add({
      name: "FIB poller",
      stop: () => Promise.resolve(poller.stop()),
      killNow: () => poller.stop(),
    });
    const all = await poller.waitFor((h) => NODES.every((n) => h.includes(nodeIp(n))), 90_000);
    if (all === undefined)
      throw new Error(`the router never had all three LB nodes for ${VIP}: ${poller.hops.join(",")}`);
    progress(`router FIB: ${VIP} via ${poller.hops.join(", ")}`);

    const bench = new Bench(ecmp, poller, pods);
    const random = seededRandom(o.seed);
    // Each pod gets its share of every kind, shuffled; the three run side by side.
    const plans = NODES.map(() =>
      shuffled(
        o.kinds.flatMap((k) => Array.from({ length: Math.ceil(o.events / NODES.length) }, () => k)),
        random,
      ),
    );
    const samples: Sample[] = [];
    const total = plans.reduce((n, p) => n + p.length, 0);
    let done = 0;
    await Promise.all(
      NODES.map(async (n, i) => {
        for (const kind of plans[i]!) {
          await sleep(200 + random() * 500);
          samples.push(...(await bench.event(kind, n)));
          if (++done % 25 === 0) progress(`  ${done}/${total} events`);
        }
      }),
    );
    const pollGaps = [...poller.gaps];
    progress(`connection resets: ${o.resets} leaves and joins under keep-alive load`);
    const resets = o.resets > 0 ? await resetRun(bench, o.resets) : undefined;

    const { text, byKind } = report(
      o.mode,
      timing,
      machine,
      samples,
      pollGaps,
      resets,
      bench.recoveries,
      bench.unsteady,
    );
    console.log(text);
    writeFileSync(join(runDir, "report.txt"), `${text}\n`);
    writeFileSync(
      join(runDir, "summary.json"),
      JSON.stringify({ options: o, machine, timing, byKind, resets, recoveries: bench.recoveries }, null, 2),
    );
    writeFileSync(
      join(runDir, "samples.csv"),
      [
        "kind,node,ms,hold_timer_fallback",
        ...samples.map(
          (s) => `${s.kind},${s.node},${s.ms?.toFixed(1) ?? ""},${holdTimerFallback(s, timing) ? 1 : 0}`,
        ),
      ].join("\n") + "\n",
    );
    const png = await writeChart(
      {
        title: "Upstream router FIB update delay per LB event (cf. ECMP paper Fig. 13(c))",
        width: 640,
        height: 320,
        data: { values: samples.filter((s) => s.ms !== undefined) },
        mark: "bar",
        encoding: {
          x: { field: "ms", bin: { step: 50 }, title: "delay from the event to the router's FIB (ms)" },
          y: { aggregate: "count", title: "events" },
          color: { field: "kind", title: "event" },
        },
      },
      join(runDir, "delays"),
    );
    console.log(`\nwritten: ${runDir}/report.txt, summary.json, samples.csv, ${png}`);
  } finally {
    progress("stopping the LB pods, the topology and the control plane");
    await teardown.run();
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
