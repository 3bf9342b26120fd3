// Reconcile-latency benchmark of the LB controller (issue 4): how long from an EndpointSlice write
// to the rules applied in the kernel, at N Services × 10 endpoints, and how much memory the
// controller holds. Real parts throughout: a local control plane of its own, the controller in a
// separate Node process (so its memory is its own), nftables in a network namespace.
//
//   npm run bench:reconcile -- [--services 10,1000,10000] [--changes M] [--concurrency 32] [--seed S]
//                              [--gap-ms 20] [--cpu-prof] [--out DIR]
//
// Per size N (ascending; the Services of smaller sizes are kept and more are added): create the
// objects, start a controller on a fresh network namespace and time its initial sync, then make M
// sequential EndpointSlice changes (one endpoint's ready condition flipped in a random slice), each
// timed from just before the API write to the controller's "data plane updated" log line (its own
// timestamp) that follows it; every 10th change (5 in all from 5,000 Services) is also checked in
// the kernel's rules. Last, a restart of the controller on the same namespace (adopting the rules)
// is timed. Prints a table and writes JSON (summary and samples) and CSV (samples) under
// bench/results/.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, DiscoveryV1Api, KubeConfig } from "@kubernetes/client-node";
import { DEFAULT_LOAD_BALANCER_CLASS, type LbConfigInput } from "@portable-lb/core/config";
import { objectId } from "../lb-image/src/dataplane/nft/nftState.ts";
import { freePort, type LabNamespace, NetnsLab, waitUntil } from "@portable-lb/lab";
import { benchControlPlane, progress } from "./lib/benchSetup.ts";
import { ControllerUnderTest } from "./lib/controllerUnderTest.ts";
import {
  ENDPOINTS_PER_SERVICE,
  POD_CIDR,
  SERVICE_PORT,
  TARGET_PORT,
  VIP_POOL,
  boundedRange,
  createServiceWithSlice,
  endpointSlice,
  podAddress,
  serviceName,
  vipOf,
} from "./lib/objects.ts";
import {
  formatReport,
  machineInfo,
  type ControllerMemory,
  type SizeResult,
  type Sample,
} from "./lib/report.ts";
import { histogramDelta, histogramQuantile, parsePrometheus, seededRandom, summarize } from "./lib/stats.ts";
import { Teardown } from "./lib/teardown.ts";

// This file's folder (no import.meta: the repository's TypeScript builds as CommonJS).
const BENCH_DIR = dirname(resolve(process.argv[1]!));
const NAMESPACE = "plb-bench";
const CONTROLLER_NAMESPACE = "portable-lb-system";
const UPDATED = "data plane updated";
const HISTOGRAM = "portable_lb_reconcile_duration_seconds";
const SYNC_TIMEOUT_MS = 30 * 60_000;
const CHANGE_TIMEOUT_MS = 60_000;

interface Options {
  sizes: number[];
  changes: number | undefined;
  concurrency: number;
  seed: number;
  gapMs: number;
  cpuProf: boolean;
  out: string;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      services: { type: "string", default: "10,1000" },
      changes: { type: "string" },
      concurrency: { type: "string", default: "32" },
      seed: { type: "string", default: "1" },
      "gap-ms": { type: "string", default: "20" },
      "cpu-prof": { type: "boolean", default: false },
      out: { type: "string", default: join(BENCH_DIR, "results") },
    },
  });
  const sizes = values.services.split(",").map((s) => Number(s.replaceAll("_", "").trim()));
  if (sizes.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--services: give sizes like 10,1000,10000 (got ${values.services})`);
  return {
    sizes: [...new Set(sizes)].sort((a, b) => a - b),
    changes: values.changes === undefined ? undefined : Number(values.changes),
    concurrency: Number(values.concurrency),
    seed: Number(values.seed),
    gapMs: Number(values["gap-ms"]),
    cpuProf: values["cpu-prof"],
    out: values.out,
  };
}

const lbConfig: LbConfigInput = {
  loadBalancerClass: DEFAULT_LOAD_BALANCER_CLASS,
  routingMode: "bgp",
  podCidr: POD_CIDR,
  vipPools: [{ name: "bench", cidr: VIP_POOL }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
};

async function main(): Promise<void> {
  const o = options();
  if (process.getuid?.() !== 0) throw new Error("the benchmark needs root (network namespaces, nftables)");
  const runId = new Date().toISOString().replaceAll(":", "-").slice(0, 19);
  const runDir = join(o.out, `reconcile-${runId}`);
  mkdirSync(runDir, { recursive: true });
  const machine = await machineInfo();
  progress(`results and controller logs: ${runDir}`);

  const teardown = new Teardown();
  try {
    const cp = await benchControlPlane(teardown, "bench-reconcile");
    const lab = await NetnsLab.create("bench-reconcile");
    // The lab registers its own exit handler; destroy() is the orderly path.
    teardown.add({ name: "netns lab", stop: () => lab.destroy(), killNow: () => undefined });

    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfig);
    const api = { core: kc.makeApiClient(CoreV1Api), discovery: kc.makeApiClient(DiscoveryV1Api) };
    for (const name of [NAMESPACE, CONTROLLER_NAMESPACE])
      await api.core.createNamespace({ body: { metadata: { name } } });

    const results: SizeResult[] = [];
    let existing = 0;
    for (const n of o.sizes) {
      const created = await createUpTo(api, existing, n, o.concurrency);
      existing = n;
      const ns = await lab.namespace(`lb-${n}`);
      const result = await measure({ o, n, ns, api, kc: cp.kubeconfig, runDir, teardown });
      result.create = created;
      results.push(result);
      progress(`N=${n}: p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms`);
    }

    machine.loadEnd = loadavg()[0]!;
    const report = formatReport(machine, results);
    console.log(report);
    const file = join(runDir, "summary.json");
    writeFileSync(file, JSON.stringify({ runId, machine, options: o, results }, null, 2));
    writeFileSync(join(runDir, "samples.csv"), samplesCsv(results));
    writeFileSync(join(runDir, "report.txt"), `${report}\n`);
    console.log(`\nwritten: ${file}, samples.csv, report.txt`);
  } finally {
    progress("stopping the controller, the network namespaces and the control plane");
    await teardown.run();
  }
}

async function createUpTo(
  api: { core: CoreV1Api; discovery: DiscoveryV1Api },
  from: number,
  to: number,
  concurrency: number,
): Promise<SizeResult["create"]> {
  const started = performance.now();
  let last = started;
  progress(`creating Services ${from}..${to - 1} with their EndpointSlices (${concurrency} in flight)`);
  await boundedRange(
    from,
    to,
    concurrency,
    (i) => createServiceWithSlice(api, NAMESPACE, DEFAULT_LOAD_BALANCER_CLASS, i),
    (done) => {
      const now = performance.now();
      if (now - last < 5_000 && done < to - from) return;
      last = now;
      progress(`  ${from + done}/${to} Services (${(done / ((now - started) / 1000)).toFixed(0)}/s)`);
    },
  );
  const seconds = (performance.now() - started) / 1000;
  return { services: to - from, seconds, perSecond: (to - from) / seconds };
}

interface MeasureArgs {
  o: Options;
  n: number;
  ns: LabNamespace;
  api: { core: CoreV1Api; discovery: DiscoveryV1Api };
  kc: string;
  runDir: string;
  teardown: Teardown;
}

async function startController(a: MeasureArgs, name: string): Promise<ControllerUnderTest> {
  const configFile = join(a.runDir, "lb-config.json");
  writeFileSync(configFile, JSON.stringify(lbConfig, null, 2));
  let profiles: string | undefined;
  if (a.o.cpuProf) mkdirSync((profiles = join(a.runDir, "profiles", name)), { recursive: true });
  const ctl = new ControllerUnderTest({
    entry: join(BENCH_DIR, "controllerProcess.mjs"),
    configFile,
    kubeconfig: a.kc,
    netns: a.ns.netns,
    port: await freePort("127.0.0.1"),
    logFile: join(a.runDir, `${name}.log`),
    ...(profiles && { cpuProfileDir: profiles }),
  });
  a.teardown.add({ name, stop: () => ctl.stop(), killNow: () => ctl.killNow() });
  return ctl;
}

async function gauge(ctl: ControllerUnderTest, name: string): Promise<number> {
  return parsePrometheus(await ctl.metrics().catch(() => "")).get(name) ?? NaN;
}

/**
 * Waits until the controller's first full reconcile is in (its /readyz: the objects all existed
 * before it started, so that run covers all N) and it serves all N services; returns when (epoch
 * ms). /metrics is read rarely: each scrape also reads the kernel's counters.
 */
async function waitForSync(ctl: ControllerUnderTest, n: number, what: string): Promise<number> {
  let readyAt: number | undefined;
  let lastReport = Date.now();
  const ok = await waitUntil(
    async () => {
      if (ctl.exited) throw new Error(`the controller exited during ${what}; see its log`);
      if (readyAt === undefined && (await ctl.ready())) readyAt = Date.now();
      if (Date.now() - lastReport < 10_000 && readyAt === undefined) return false;
      lastReport = Date.now();
      const services = await gauge(ctl, "portable_lb_virtual_services");
      if (readyAt === undefined)
        progress(`  ${what}: not ready yet, ${services || 0}/${n} services programmed`);
      return services === n && readyAt !== undefined;
    },
    SYNC_TIMEOUT_MS,
    100,
  );
  if (!ok)
    throw new Error(`${what}: not all ${n} services programmed within ${SYNC_TIMEOUT_MS / 60_000} min`);
  // The log line's own time is more precise than the poll, when the run changed anything.
  const updated = ctl.lastLine(UPDATED);
  return updated?.["services"] === n ? updated.time : readyAt!;
}

/** Until the controller has logged nothing for `quietMs` (so no run is in flight when measuring). */
async function settle(ctl: ControllerUnderTest, quietMs = 2_000): Promise<void> {
  await waitUntil(() => Date.now() - ctl.lastLineAt >= quietMs, 120_000, 100);
}

async function memoryOf(ctl: ControllerUnderTest): Promise<ControllerMemory> {
  const m = parsePrometheus(await ctl.metrics());
  return {
    ...ctl.memory(),
    heapUsed: m.get("nodejs_heap_size_used_bytes") ?? NaN,
    heapTotal: m.get("nodejs_heap_size_total_bytes") ?? NaN,
  };
}

async function measure(a: MeasureArgs): Promise<SizeResult> {
  const { n } = a;
  const changes = a.o.changes ?? (n >= 10_000 ? 100 : 200);
  // Listing one chain makes nft 1.0.6 read every rule and set of the table (13 s at 10,000 Services).
  const checkEvery = n >= 5_000 ? Math.ceil(changes / 5) : 10;
  progress(`N=${n}: starting the controller (nftables in ${a.ns.netns})`);
  let ctl = await startController(a, `controller-${n}`);
  const syncedAt = await waitForSync(ctl, n, "initial sync");
  const syncSeconds = (syncedAt - ctl.startedAt) / 1000;
  progress(`N=${n}: initial sync took ${syncSeconds.toFixed(1)} s; settling`);
  await settle(ctl);
  const afterSync = await memoryOf(ctl);

  const random = seededRandom(a.o.seed + n);
  const ready = new Map<number, boolean[]>();
  const samples: Sample[] = [];
  let timeouts = 0;
  let checked = 0;
  let mismatches = 0;
  const before = parsePrometheus(await ctl.metrics());
  progress(`N=${n}: ${changes} sequential EndpointSlice changes`);
  for (let k = 0; k < changes; k++) {
    const i = Math.floor(random() * n);
    const j = Math.floor(random() * ENDPOINTS_PER_SERVICE);
    const flags = ready.get(i) ?? Array<boolean>(ENDPOINTS_PER_SERVICE).fill(true);
    const readyNow = !flags[j];
    flags[j] = readyNow;
    ready.set(i, flags);
    const body = endpointSlice(i, flags);

    const t0 = performance.timeOrigin + performance.now();
    // Registered before the write: the answer may come before the write's own response.
    const applied = ctl.nextLine((l) => l.msg === UPDATED && l.time >= Math.floor(t0), CHANGE_TIMEOUT_MS);
    await a.api.discovery.replaceNamespacedEndpointSlice({
      name: serviceName(i),
      namespace: NAMESPACE,
      body,
    });
    const writeMs = performance.timeOrigin + performance.now() - t0;
    const line = await applied.catch(() => undefined);
    if (!line) {
      timeouts++;
      progress(`  change ${k}: no "${UPDATED}" within ${CHANGE_TIMEOUT_MS / 1000} s`);
      continue;
    }
    const sample: Sample = {
      change: k,
      service: i,
      endpoint: j,
      ready: readyNow,
      writeMs,
      latencyMs: line.time - t0,
      verified: undefined,
    };
    if (k % checkEvery === 0) {
      sample.verified = await kernelHas(a.ns, i, j, readyNow);
      checked++;
      if (!sample.verified) mismatches++;
    }
    samples.push(sample);
    if ((k + 1) % 50 === 0) progress(`  ${k + 1}/${changes} changes`);
    await sleep(a.o.gapMs);
  }
  await settle(ctl, 1_000);
  const after = parsePrometheus(await ctl.metrics());
  const afterLoad = await memoryOf(ctl);
  const histogram = histogramDelta(HISTOGRAM, before, after);

  progress(`N=${n}: restarting the controller on the same namespace (adopting the rules)`);
  await a.teardown.stopOne(`controller-${n}`);
  ctl = await startController(a, `controller-${n}-restart`);
  const restartedAt = await waitForSync(ctl, n, "restart");
  const restartChanges = await gauge(ctl, 'portable_lb_rule_changes_total{engine="nftables"}');
  const afterRestart = await memoryOf(ctl);
  await a.teardown.stopOne(`controller-${n}-restart`);

  return {
    services: n,
    endpoints: n * ENDPOINTS_PER_SERVICE,
    create: { services: 0, seconds: 0, perSecond: NaN },
    syncSeconds,
    restartSeconds: (restartedAt - ctl.startedAt) / 1000,
    restartRuleChanges: Number.isNaN(restartChanges) ? 0 : restartChanges,
    changes,
    timeouts,
    latencyMs: summarize(samples.map((s) => s.latencyMs)),
    writeMs: summarize(samples.map((s) => s.writeMs)),
    histogram: {
      runs: histogram.count,
      meanMs: (histogram.sum / histogram.count) * 1000,
      p50Ms: histogramQuantile(histogram, 0.5) * 1000,
      p99Ms: histogramQuantile(histogram, 0.99) * 1000,
    },
    memory: { afterSync, afterLoad, afterRestart },
    kernelChecks: { checked, mismatches },
    samples,
  };
}

/** Whether the kernel's rule for Service i sends new flows to endpoint j exactly when it is ready. */
async function kernelHas(ns: LabNamespace, i: number, j: number, readyNow: boolean): Promise<boolean> {
  const chain = `svc_${objectId({ protocol: "tcp", vip: vipOf(i), port: SERVICE_PORT })}`;
  const r = await ns.exec("nft", ["list", "chain", "ip", "portable_lb", chain]);
  return r.code === 0 && r.stdout.includes(`: ${podAddress(i, j)} . ${TARGET_PORT}`) === readyNow;
}

function samplesCsv(results: SizeResult[]): string {
  const rows = ["services,change,service,endpoint,ready,write_ms,latency_ms,kernel_verified"];
  for (const r of results)
    for (const s of r.samples)
      rows.push(
        [r.services, s.change, s.service, s.endpoint, s.ready, s.writeMs.toFixed(2), s.latencyMs.toFixed(2)]
          .concat(s.verified === undefined ? "" : String(s.verified))
          .join(","),
      );
  return `${rows.join("\n")}\n`;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exitCode = 1;
});
