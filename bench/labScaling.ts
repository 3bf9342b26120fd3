// Throughput while the number of LB pods changes, on the lab (the ECMP paper's Fig. 13(b)):
// 60 connections from the client send requests back to back to the demo VIP while the LB
// Deployment is scaled 3 -> 2 -> 1 -> 2 -> 3, then a demo backend is added and removed again;
// each second records the requests answered, the LB nodes in the router's route and the requests
// that failed. Beside that load, 60 long-lived connections (each sends its request over 5 s, so
// every one is open when a change comes: the demo's server closes a connection after one
// answer) give per change (LB leave, LB join, backend added, backend removed) the share of the
// open connections it kept. Run it once per data-plane mode to set SNAT and DSR side by side (the
// report names the mode the lab runs):
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:lab-scaling -- [--step-seconds 15]
//   PLB_LAB_MODE=snat npm run lab && npm run --silent lab -- outputs | npm run bench:lab-scaling
//
// Writes series.csv, summary.json, report.txt and throughput.png under bench/results/lab-scaling-<time>/.

import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { progress } from "./lib/benchSetup.ts";
import { FibPoller } from "./lib/fibPoller.ts";
import { dataPlaneMode, demoReplicas, labRig, scaleDemo, setDemoReplicas } from "./lib/labRig.ts";
import { countCodes, type LoadResult, runLoad } from "./lib/loadClient.ts";
import { machineInfo } from "./lib/report.ts";
import { newRunDir, writeRunFiles } from "./lib/runFiles.ts";

const BENCH_DIR = dirname(resolve(process.argv[1]!));
const NAMESPACE = "portable-lb-system";
const DEPLOYMENT = "portable-lb-controller";
const CONNECTIONS = 60;
/** The long-lived connections: each request's header is sent over this long. */
const LONG_LIVED_MS = 5_000;
/** One state per step: the LB pods, and the demo's backends beyond the lab's own count. */
const STEPS = [
  { lbPods: 3, extraBackends: 0 },
  { lbPods: 2, extraBackends: 0 },
  { lbPods: 1, extraBackends: 0 },
  { lbPods: 2, extraBackends: 0 },
  { lbPods: 3, extraBackends: 0 },
  { lbPods: 3, extraBackends: 1 },
  { lbPods: 3, extraBackends: 0 },
] as const;
type Step = (typeof STEPS)[number];
const CHANGE_KINDS = ["leave", "join", "backend added", "backend removed"] as const;

function changeKind(from: Step, to: Step): (typeof CHANGE_KINDS)[number] {
  if (to.lbPods !== from.lbPods) return to.lbPods < from.lbPods ? "leave" : "join";
  return to.extraBackends > from.extraBackends ? "backend added" : "backend removed";
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "step-seconds": { type: "string", default: "15" },
      out: { type: "string", default: join(BENCH_DIR, "results") },
    },
  });
  const step = Number(values["step-seconds"]);
  if (!(step >= 5)) throw new Error(`--step-seconds: at least 5 (got ${values["step-seconds"]})`);
  const rig = await labRig();
  const machine = await machineInfo();
  const mode = await dataPlaneMode(rig);
  const runDir = newRunDir(values.out, "lab-scaling");
  const backends = await demoReplicas(rig);
  const scale = (replicas: number) =>
    rig.apps.replaceNamespacedDeploymentScale({
      name: DEPLOYMENT,
      namespace: NAMESPACE,
      body: { metadata: { name: DEPLOYMENT, namespace: NAMESPACE }, spec: { replicas } },
    });

  const seconds = step * STEPS.length;
  const poller = new FibPoller(rig.plan.router.netns, `${rig.vip}/32`, 50);
  const lbCount: number[] = [];
  const sampler = setInterval(() => lbCount.push(poller.hops.length), 1_000);
  progress(
    `load: ${CONNECTIONS} connections for ${seconds} s; LB pods ${STEPS.map((s) => s.lbPods).join(" -> ")}, ` +
      `then a backend added and removed; every ${step} s`,
  );
  const load = (trickleMs?: number) =>
    runLoad(rig.plan.client.netns, {
      urls: [`http://${rig.vip}/`],
      connections: CONNECTIONS,
      seconds,
      intervalMs: 0,
      trickleMs,
    });
  const client = load();
  const longLivedClient = load(LONG_LIVED_MS);
  /** When each step's scaling was asked for (epoch ms); the first step has none. */
  const changedAt: number[] = [];
  try {
    for (const [i, state] of STEPS.entries()) {
      const before = STEPS[i - 1];
      if (before) {
        progress(`  t=${i * step} s: LB pods ${state.lbPods}, backends ${backends + state.extraBackends}`);
        changedAt[i] = Date.now();
        if (state.lbPods !== before.lbPods) await scale(state.lbPods);
        else await setDemoReplicas(rig, backends + state.extraBackends);
      }
      await sleep(step * 1000);
    }
  } finally {
    await scale(3);
    await scaleDemo(rig, backends).catch((err: unknown) =>
      progress(`demo: not back to ${backends}: ${String(err)}`),
    );
  }
  const [result, longLived] = await Promise.all([client, longLivedClient]);
  clearInterval(sampler);
  poller.stop();
  const series = result.perSecond.map((requests, s) => ({
    second: s,
    requests,
    lbNodes: lbCount[s] ?? lbCount.at(-1) ?? 0,
    target: STEPS[Math.min(STEPS.length - 1, Math.floor(s / step))]!.lbPods,
    resets: result.failures.filter((f) => Math.floor((f.t - result.started) / 1000) === s).length,
  }));
  const perStep = STEPS.map((state, i) => {
    const rows = series.slice(i * step + 2, (i + 1) * step); // skip each step's first seconds of change
    return {
      lbPods: state.lbPods,
      backends: backends + state.extraBackends,
      requestsPerSecond: Math.round(rows.reduce((a, r) => a + r.requests, 0) / Math.max(1, rows.length)),
    };
  });
  // Each change's share: the long-lived connections (by index: a failed one is reopened under it)
  // that failed from that change until the next one, of the CONNECTIONS open when it came; and the
  // back-to-back load's failed requests.
  const changes = STEPS.flatMap((state, i) => {
    const at = changedAt[i];
    const before = STEPS[i - 1];
    if (at === undefined || !before) return [];
    const until = changedAt[i + 1] ?? Infinity;
    const within = (r: LoadResult) => r.failures.filter((f) => f.t >= at && f.t < until);
    const failed = within(longLived);
    const reset = new Set(failed.map((f) => f.connection));
    const requestsFailed = within(result);
    const errors = countCodes([...failed, ...requestsFailed]);
    const kind = changeKind(before, state);
    const [from, to] =
      kind === "leave" || kind === "join"
        ? [before.lbPods, state.lbPods]
        : [before, state].map((s) => backends + s.extraBackends);
    return [
      {
        from: from!,
        to: to!,
        kind,
        /** What the failed requests of both loads saw (error code or message), counted. */
        errors,
        reset: reset.size,
        requestsFailed: requestsFailed.length,
        keptPct: 100 - (100 * reset.size) / CONNECTIONS,
      },
    ];
  });
  const keptOf = (kind: string) => {
    const mine = changes.filter((c) => c.kind === kind);
    return mine.reduce((a, c) => a + c.keptPct, 0) / Math.max(1, mine.length);
  };
  const kept = Object.fromEntries(CHANGE_KINDS.map((k) => [k, keptOf(k)]));
  const text = [
    "portable-lb on the lab: throughput while the LB count changes (cf. ECMP paper Fig. 13(b))",
    `machine: ${machine.cpus} x ${machine.cpuModel}; ${CONNECTIONS} connections back to back, ` +
      `${CONNECTIONS} long-lived (${LONG_LIVED_MS / 1000} s each)`,
    `data plane: ${mode}`,
    `requests: ${result.requests} in ${seconds} s, ${result.failures.length} failed; ` +
      `long-lived connections: ${longLived.requests}, ${longLived.failures.length} failed`,
    "",
    "LB pods  backends  requests/s (steady part of the step)",
    ...perStep.map(
      (p) =>
        `${String(p.lbPods).padStart(7)}  ${String(p.backends).padStart(8)}  ${String(p.requestsPerSecond).padStart(10)}`,
    ),
    "",
    "change                    long-lived failed  kept    requests failed  errors",
    ...changes.map(
      (c) =>
        `${`${c.kind} ${c.from} -> ${c.to}`.padEnd(25)} ${String(c.reset).padStart(17)}  ${c.keptPct.toFixed(1).padStart(5)}%  ` +
        `${String(c.requestsFailed).padStart(15)}  ` +
        Object.entries(c.errors)
          .map(([e, n]) => `${e} x${n}`)
          .join(", "),
    ),
    `kept per ${CHANGE_KINDS.map((k) => `${k}: ${kept[k]!.toFixed(1)}%`).join(", ")} (targets with dsr: >= 99% but for a backend removed)`,
  ].join("\n");
  await writeRunFiles(runDir, {
    report: text,
    summary: {
      machine,
      mode,
      step,
      perStep,
      changes,
      keptPct: kept,
      requests: result.requests,
      requestsFailed: result.failures.length,
      longLivedConnections: longLived.requests,
      longLivedFailed: longLived.failures.length,
    },
    csv: {
      name: "series.csv",
      header: "second,requests,lb_nodes_in_route,lb_pods_target,resets",
      rows: series.map((r) => `${r.second},${r.requests},${r.lbNodes},${r.target},${r.resets}`),
    },
    chart: {
      name: "throughput",
      spec: {
        title: "Lab: requests/s while the LB pods go 3 -> 2 -> 1 -> 2 -> 3, a backend comes and goes",
        width: 640,
        height: 300,
        data: { values: series },
        layer: [
          {
            mark: "line",
            encoding: {
              x: { field: "second", type: "quantitative", title: "time (s)" },
              y: { field: "requests", type: "quantitative", title: "requests/s" },
            },
          },
          {
            mark: { type: "line", color: "firebrick", strokeDash: [4, 2] },
            encoding: {
              x: { field: "second", type: "quantitative" },
              y: { field: "lbNodes", type: "quantitative", title: "LB nodes in the router's route" },
            },
          },
        ],
        resolve: { scale: { y: "independent" } },
      },
    },
  });
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
