// Throughput while the number of LB pods changes, on the lab (the ECMP paper's Fig. 13(b)):
// 60 keep-alive connections from the client send requests back to back to the demo VIP while the
// LB Deployment is scaled 3 -> 2 -> 1 -> 2 -> 3, and each second records the requests answered,
// the LB nodes in the router's route and the connections reset (ECMP rehash, and the pods that go).
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:lab-scaling -- [--step-seconds 15]
//
// Writes series.csv, summary.json, report.txt and throughput.png under bench/results/lab-scaling-<time>/.

import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { progress } from "./lib/benchSetup.ts";
import { FibPoller } from "./lib/fibPoller.ts";
import { labRig } from "./lib/labRig.ts";
import { runLoad } from "./lib/loadClient.ts";
import { machineInfo } from "./lib/report.ts";
import { newRunDir, writeRunFiles } from "./lib/runFiles.ts";

const BENCH_DIR = dirname(resolve(process.argv[1]!));
const NAMESPACE = "portable-lb-system";
const DEPLOYMENT = "portable-lb-controller";
const CONNECTIONS = 60;
const STEPS = [3, 2, 1, 2, 3];

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
  const runDir = newRunDir(values.out, "lab-scaling");
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
    `load: ${CONNECTIONS} connections for ${seconds} s; LB pods ${STEPS.join(" -> ")}, every ${step} s`,
  );
  const client = runLoad(rig.plan.client.netns, {
    urls: [`http://${rig.vip}/`],
    connections: CONNECTIONS,
    seconds,
    intervalMs: 0,
  });
  try {
    for (const [i, replicas] of STEPS.entries()) {
      if (i > 0) {
        progress(`  t=${i * step} s: LB pods -> ${replicas}`);
        await scale(replicas);
      }
      await sleep(step * 1000);
    }
  } finally {
    await scale(3);
  }
  const result = await client;
  clearInterval(sampler);
  poller.stop();
  const series = result.perSecond.map((requests, s) => ({
    second: s,
    requests,
    lbNodes: lbCount[s] ?? lbCount.at(-1) ?? 0,
    target: STEPS[Math.min(STEPS.length - 1, Math.floor(s / step))]!,
    resets: result.failures.filter((f) => Math.floor((f.t - result.started) / 1000) === s).length,
  }));
  const perStep = STEPS.map((target, i) => {
    const rows = series.slice(i * step + 2, (i + 1) * step); // skip each step's first seconds of change
    return {
      target,
      requestsPerSecond: Math.round(rows.reduce((a, r) => a + r.requests, 0) / Math.max(1, rows.length)),
    };
  });
  const text = [
    "portable-lb on the lab: throughput while the LB count changes (cf. ECMP paper Fig. 13(b))",
    `machine: ${machine.cpus} x ${machine.cpuModel}; ${CONNECTIONS} keep-alive connections, back to back`,
    `requests: ${result.requests} in ${seconds} s; resets: ${result.failures.length}`,
    "",
    "LB pods  requests/s (steady part of the step)",
    ...perStep.map((p) => `${String(p.target).padStart(7)}  ${String(p.requestsPerSecond).padStart(10)}`),
  ].join("\n");
  await writeRunFiles(runDir, {
    report: text,
    summary: { machine, step, perStep, requests: result.requests, resets: result.failures.length },
    csv: {
      name: "series.csv",
      header: "second,requests,lb_nodes_in_route,lb_pods_target,resets",
      rows: series.map((r) => `${r.second},${r.requests},${r.lbNodes},${r.target},${r.resets}`),
    },
    chart: {
      name: "throughput",
      spec: {
        title: "Lab: requests/s while the LB pods go 3 -> 2 -> 1 -> 2 -> 3 (cf. ECMP paper Fig. 13(b))",
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
