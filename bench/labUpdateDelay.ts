// ECMP update delay on the lab (the ECMP paper's Fig. 13(c)): how long the upstream router's FIB
// takes to follow LB pods that Kubernetes removes and recreates. Each event deletes one LB pod, as
// a rollout or an eviction does (its preStop withdraws, then it stops), and times, from the
// deletion, the router dropping that pod's node from the VIP's route (leave), and then, from
// that moment, its replacement bringing the node back (join: scheduling, the kubelet starting the
// containers, the controller's sync, BGP).
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:lab-delay -- [--events 30] [--out DIR]
//
// Writes samples.csv, summary.json, report.txt and delays.png under bench/results/lab-delay-<time>/.

import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { LB_APP_LABEL } from "@portable-lb/core/config";
import { progress } from "./lib/benchSetup.ts";
import { FibPoller } from "./lib/fibPoller.ts";
import { labRig } from "./lib/labRig.ts";
import { machineInfo } from "./lib/report.ts";
import { newRunDir, writeRunFiles } from "./lib/runFiles.ts";
import { seededRandom, summarize } from "./lib/stats.ts";

const BENCH_DIR = dirname(resolve(process.argv[1]!));
const NAMESPACE = "portable-lb-system";
const LEAVE_TIMEOUT_MS = 60_000;
const JOIN_TIMEOUT_MS = 120_000;

interface Sample {
  kind: "leave" | "join";
  node: string;
  ms: number | undefined;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      events: { type: "string", default: "30" },
      seed: { type: "string", default: "1" },
      out: { type: "string", default: join(BENCH_DIR, "results") },
    },
  });
  const events = Number(values.events);
  if (!Number.isInteger(events) || events < 1)
    throw new Error(`--events: a positive integer (got ${values.events})`);
  const rig = await labRig();
  const machine = await machineInfo();
  const runDir = newRunDir(values.out, "lab-delay");
  const nodeIp = new Map(rig.plan.nodes.map((n) => [n.name, n.ip]));
  const lbIps = rig.plan.nodes.filter((n) => n.role === "lb").map((n) => n.ip);
  const all = (hops: string[]) => lbIps.every((ip) => hops.includes(ip));
  const poller = new FibPoller(rig.plan.router.netns, `${rig.vip}/32`, 10);
  const random = seededRandom(Number(values.seed));
  const samples: Sample[] = [];
  try {
    if ((await poller.waitFor(all, 60_000)) === undefined)
      throw new Error(`the router does not route ${rig.vip} over every LB node (${poller.hops.join(", ")})`);
    for (let i = 1; i <= events; i++) {
      const pods = (
        await rig.core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: `app=${LB_APP_LABEL}` })
      ).items.filter((p) => p.status?.phase === "Running" && !p.metadata?.deletionTimestamp);
      const pod = pods[Math.floor(random() * pods.length)];
      if (!pod) throw new Error(`no running LB pod in ${NAMESPACE}`);
      const node = pod.spec!.nodeName!;
      const ip = nodeIp.get(node)!;
      const start = performance.now();
      const left = poller.waitFor((hops) => !hops.includes(ip), LEAVE_TIMEOUT_MS);
      await rig.core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: NAMESPACE });
      const leftAt = await left;
      samples.push({ kind: "leave", node, ms: leftAt === undefined ? undefined : leftAt - start });
      const back = await poller.waitFor((hops) => hops.includes(ip), JOIN_TIMEOUT_MS);
      samples.push({
        kind: "join",
        node,
        ms: back === undefined || leftAt === undefined ? undefined : back - leftAt,
      });
      progress(
        `  ${i}/${events}: ${node} left after ${samples.at(-2)!.ms?.toFixed(0)} ms, back after ${samples.at(-1)!.ms?.toFixed(0)} ms`,
      );
      // The next event starts from the full set, with the new pod's BFD sessions up.
      await poller.waitFor(all, JOIN_TIMEOUT_MS);
      await sleep(3_000 + random() * 2_000);
    }
  } finally {
    poller.stop();
  }

  const lines = [
    "portable-lb on the lab: LB pod deleted -> router FIB (cf. ECMP paper Fig. 13(c))",
    `machine: ${machine.cpus} x ${machine.cpuModel}; kernel ${machine.kernel}`,
    `${events} events; leave = deletion -> node out of the route; join = node out -> node back (new pod)`,
    "",
    "kind     events  p50 ms  p90 ms  p99 ms  max ms  timeouts",
  ];
  const byKind: Record<string, ReturnType<typeof summarize> & { timeouts: number }> = {};
  for (const kind of ["leave", "join"] as const) {
    const mine = samples.filter((s) => s.kind === kind);
    const ok = mine.flatMap((s) => (s.ms === undefined ? [] : [s.ms]));
    const s = { ...summarize(ok), timeouts: mine.length - ok.length };
    byKind[kind] = s;
    lines.push(
      [
        kind.padEnd(8),
        String(s.count).padStart(6),
        ...[s.p50, s.p90, s.p99, s.max].map((v) => v.toFixed(0).padStart(7)),
        String(s.timeouts).padStart(9),
      ].join(" "),
    );
  }
  const text = lines.join("\n");
  await writeRunFiles(runDir, {
    report: text,
    summary: { events, machine, byKind },
    csv: {
      name: "samples.csv",
      header: "kind,node,ms",
      rows: samples.map((s) => `${s.kind},${s.node},${s.ms?.toFixed(1) ?? ""}`),
    },
    chart: {
      name: "delays",
      spec: {
        title: "Lab: router FIB update delay per LB pod deletion (cf. ECMP paper Fig. 13(c))",
        width: 640,
        height: 320,
        data: { values: samples.filter((s) => s.ms !== undefined) },
        mark: "bar",
        encoding: {
          x: { field: "ms", bin: { maxbins: 40 }, title: "delay (ms)" },
          y: { aggregate: "count", title: "events" },
          color: { field: "kind", title: "event" },
        },
      },
    },
  });
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
