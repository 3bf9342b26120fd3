// Throughput against the number of backend pods, on the lab (the thesis's Fig. 6.4): the client
// sends requests back to back to the demo web service four ways, on a new connection each (the
// demo pods' server closes every connection after its answer):
//   portable-lb    the VIP: router ECMP over the LB nodes, the LB pods' data plane
//   direct         the pods' own addresses, each client connection kept on one pod (no LB)
//   direct-random  the pods' own addresses, each new connection to a pod picked at random (no LB)
//   nginx          nginx as the load balancer on an LB node (proxying to the pods; the thesis's baseline)
// nginx closes its client connections after each answer too (keepalive_timeout 0): kept alive, they
// would spare the client the handshakes the other two ways pay, and measure that instead of the LB.
// Nor does it keep connections to the pods (the pods close them; nginx reused closed ones and failed).
// This machine has two CPUs shared by the client, the LBs and the pods, so absolute figures say
// little; the report gives each way's ratio to direct-to-pod at the same backend count, and what
// the load balancing itself costs: the whole machine's busy CPU per request (/proc/stat, over each
// run) minus direct-to-pod's, and that cost as a share of nginx's, against both direct ways. They
// differ in the spread: `direct` gives each pod the same share of the open connections all the
// time, which no balancer of new connections does; behind the VIP (or nginx) a pod's share varies
// from moment to moment, as with `direct-random`, and its server then sleeps and wakes more often
// per request (measured: ~2 more context switches per request with 3 pods, either way).
// portable-lb runs in the lab's data-plane mode (named in the report): once per mode sets DSR and
// SNAT side by side.
// The machine's own noise is as large as the differences, so each backend count runs in rounds:
// every round runs the four ways back to back (in a rotated order), the ratios are taken within a
// round, and the report gives their median and range over the rounds. The client keeps 6
// connections per backend pod open, enough to keep both CPUs busy. The report counts connections
// the pods' server dropped with its accept queue full (lib/listenOverflows.ts), each a 1 s TCP retry
// the path has no part in: busybox's httpd, the demo's server before, queued 9 and dropped dozens a
// run whenever Maglev put more on one pod. Where each way's busy CPU went, per group of processes,
// comes after the table (lib/cpuBreakdown.ts).
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:lab-throughput -- [--backends 1,2,3,6] [--seconds 10] [--rounds 3]
//   PLB_LAB_MODE=snat npm run lab && npm run --silent lab -- outputs | npm run bench:lab-throughput
//
// For `direct` the router gets routes to the nodes' pod subnets for the run (removed after), as a
// flat routed network would have. Writes results.csv, summary.json, report.txt and throughput.png
// under bench/results/lab-throughput-<time>/.
import { existsSync, globSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  CLOCK_TICKS_PER_SECOND,
  DEMO_PORT,
  instancesRoot,
  labNamespace,
  parseProcStat,
  type ProcessRecord,
  stopRecorded,
} from "@portable-lb/lab";
import { busyDuring } from "./lib/busyCpu.ts";
import { progress } from "./lib/benchSetup.ts";
import { cpuBreakdown } from "./lib/cpuBreakdown.ts";
import type { ProcessSample } from "./lib/idleCpu.ts";
import { labProcesses } from "./lib/labProcesses.ts";
import { overflowsOf } from "./lib/listenOverflows.ts";
import { dataPlaneMode, demoReplicas, labRig, scaleDemo, type LabRig } from "./lib/labRig.ts";
import { runLoad } from "./lib/loadClient.ts";
import { percentile } from "./lib/stats.ts";
import { machineInfo } from "./lib/report.ts";
import { newRunDir, writeRunFiles } from "./lib/runFiles.ts";

const BENCH_DIR = dirname(resolve(process.argv[1]!));
const BACKEND_PORT = DEMO_PORT;
/** The demo pods' server (the lab's demoWebApp.ts, scripts/image/demo-web). */
const DEMO_SERVER = "demo-web";
const NGINX_PORT = 8081;
/** Enough to keep both CPUs busy (and the figures comparable with runs on busybox's httpd). */
const CONNECTIONS_PER_BACKEND = 6;
const MODES = ["portable-lb", "direct", "direct-random", "nginx"] as const;
type Mode = (typeof MODES)[number];
/**
 * The two direct-to-pod baselines. `direct` keeps each client connection on one pod, an even and
 * steady spread no balancer of new connections gives; `direct-random` sends each new connection to
 * a pod picked at random, the spread a hash-based balancer gives (Maglev, ECMP, IPVS's mh), so a
 * pod's share of the open connections varies from moment to moment as it does behind the VIP.
 */
const BASELINES = ["direct", "direct-random"] as const;
type Baseline = (typeof BASELINES)[number];
interface Run {
  mode: Mode;
  backends: number;
  round: number;
  rps: number;
  failures: number;
  cpuMsPerRequest: number;
  /** CPU the hypervisor gave others while this machine's wanted to run, per request: not in the busy CPU. */
  stealMsPerRequest: number;
  /** Connections the backends' servers dropped with their accept queue full (each costs a 1 s retry). */
  backlogDrops: number;
  /** Where that busy CPU went, ms per request: per group of the lab's processes, the load client, and the rest. */
  where: Record<string, number>;
}

/** Groups worth a row of the breakdown: at least this many ms per request in some run. */
const BREAKDOWN_MIN_MS = 0.005;

/** CPU seconds of this process's waited-for children (the load client runs as one). */
const childrenSeconds = () => {
  const self = parseProcStat(readFileSync("/proc/self/stat", "utf8"));
  return (self.cutime + self.cstime) / CLOCK_TICKS_PER_SECOND;
};

const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );
const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;

function nginxBinary(): string {
  const found = globSync(join(dirname(instancesRoot()), "tools", "nginx-*", "bin", "nginx"));
  if (!found[0])
    throw new Error("nginx is not in the tool cache: run scripts/bootstrap.sh (scripts/bootstrap/nginx.sh)");
  return found[0];
}

function nginxConfig(dir: string, backends: string[]): string {
  return [
    "worker_processes 1;",
    `pid ${dir}/nginx.pid;`,
    "error_log stderr warn;",
    "events { worker_connections 1024; }",
    "http {",
    "  access_log off;",
    "  keepalive_timeout 0;",
    `  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;`,
    `  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;`,
    "  upstream backends {",
    ...backends.map((ip) => `    server ${ip}:${BACKEND_PORT};`),
    "  }",
    "  server {",
    `    listen ${NGINX_PORT};`,
    "    location / { proxy_pass http://backends; }",
    "  }",
    "}",
    "",
  ].join("\n");
}

/** Requests per second of back-to-back load from the client to `urls` for `seconds`, and its CPU. */
async function load(
  rig: LabRig,
  snapshot: () => ProcessSample[],
  urls: string[],
  spread: "fixed" | "random",
  connections: number,
  seconds: number,
): Promise<Omit<Run, "mode" | "backends" | "round">> {
  const before = snapshot();
  const overflowsBefore = overflowsOf(before, DEMO_SERVER);
  const clientBefore = childrenSeconds();
  const started = performance.now();
  const {
    result: r,
    busyS,
    stealS,
  } = await busyDuring(() =>
    runLoad(rig.plan.client.netns, { urls, spread, connections, seconds, intervalMs: 0 }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  const after = snapshot();
  const where = cpuBreakdown({
    before,
    after,
    elapsedS,
    requests: r.requests,
    busyS,
    clientS: childrenSeconds() - clientBefore,
  });
  return {
    rps: r.requests / seconds,
    failures: r.failures.length,
    cpuMsPerRequest: (1000 * busyS) / Math.max(1, r.requests),
    stealMsPerRequest: (1000 * stealS) / Math.max(1, r.requests),
    backlogDrops: overflowsOf(after, DEMO_SERVER) - overflowsBefore,
    where,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      backends: { type: "string", default: "1,2,3,6" },
      seconds: { type: "string", default: "10" },
      rounds: { type: "string", default: "3" },
      out: { type: "string", default: join(BENCH_DIR, "results") },
    },
  });
  const counts = values.backends.split(",").map(Number);
  if (counts.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--backends: positive integers (got ${values.backends})`);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`--rounds: a positive integer (got ${values.rounds})`);
  const rig = await labRig();
  const lbMode = await dataPlaneMode(rig);
  const nginx = nginxBinary();
  const machine = await machineInfo();
  const runDir = newRunDir(values.out, "lab-throughput");
  const lbNode = rig.plan.nodes.find((n) => n.role === "lb")!;
  const router = labNamespace(rig.plan, rig.plan.router.netns);
  const nodes = (await rig.core.listNode()).items.map((n) => ({
    ip: n.status!.addresses!.find((a) => a.type === "InternalIP")!.address,
    podCidr: n.spec!.podCIDR!,
  }));
  const snapshot = labProcesses(rig.plan);
  const original = await demoReplicas(rig);
  const nginxDir = join(runDir, "nginx");
  const runs: Run[] = [];
  let nginxProc: ProcessRecord | undefined;
  try {
    for (const n of nodes) await router.route(n.podCidr, n.ip);
    for (const count of counts) {
      const ips = await scaleDemo(rig, count);
      progress(`${count} backend pod(s): ${ips.join(", ")}`);
      mkdirSync(nginxDir, { recursive: true });
      writeFileSync(join(nginxDir, "nginx.conf"), nginxConfig(nginxDir, ips));
      const procs: ProcessRecord[] = [];
      await labNamespace(rig.plan, lbNode.netns, procs).spawn(
        "nginx",
        nginx,
        ["-p", nginxDir, "-c", join(nginxDir, "nginx.conf"), "-e", "stderr", "-g", "daemon off;"],
        { marker: join(nginxDir, "nginx.conf"), waitForPort: NGINX_PORT },
      );
      nginxProc = procs[0];
      const urls: Record<Mode, string[]> = {
        "portable-lb": [`http://${rig.vip}/`],
        direct: ips.map((ip) => `http://${ip}:${BACKEND_PORT}/`),
        "direct-random": ips.map((ip) => `http://${ip}:${BACKEND_PORT}/`),
        nginx: [`http://${lbNode.ip}:${NGINX_PORT}/`],
      };
      for (let round = 0; round < rounds; round++) {
        // Rotated, so that no way always runs first (on a machine still settling) or last.
        for (const mode of MODES.map((_, i) => MODES[(i + round) % MODES.length]!)) {
          const spread = mode === "direct-random" ? "random" : "fixed";
          const r = await load(rig, snapshot, urls[mode], spread, count * CONNECTIONS_PER_BACKEND, seconds);
          runs.push({ mode, backends: count, round, ...r });
          progress(
            `  round ${round + 1} ${mode.padEnd(12)} ${r.rps.toFixed(0).padStart(6)} requests/s, ${r.failures} failures, ${r.backlogDrops} backlog drops`,
          );
        }
      }
      if (nginxProc) await stopRecorded(nginxProc, 5_000);
      nginxProc = undefined;
    }
  } finally {
    if (nginxProc) await stopRecorded(nginxProc, 5_000);
    for (const n of nodes) await router.ip("route", "del", n.podCidr).catch(() => undefined);
    await scaleDemo(rig, original).catch((err: unknown) =>
      progress(`demo: not back to ${original}: ${String(err)}`),
    );
    if (existsSync(nginxDir)) rmSync(nginxDir, { recursive: true, force: true });
  }

  const at = (mode: Mode, count: number, round: number) =>
    runs.find((r) => r.mode === mode && r.backends === count && r.round === round)!;
  // Per run, against each direct-to-pod run of its own round.
  const against = (r: Run, baseline: Baseline) => {
    const direct = at(baseline, r.backends, r.round);
    // What balancing adds per request: its run's busy CPU per request beyond direct-to-pod's.
    const lbCpuMs = (x: Run) => x.cpuMsPerRequest - direct.cpuMsPerRequest;
    return {
      ratio: r.rps / direct.rps,
      lbCpuMsPerRequest: lbCpuMs(r),
      costVsNginx: lbCpuMs(r) / lbCpuMs(at("nginx", r.backends, r.round)),
    };
  };
  const paired = runs.map((r) => ({
    ...r,
    ...against(r, "direct"),
    random: against(r, "direct-random"),
  }));
  const rows = counts.flatMap((backends) =>
    MODES.map((mode) => {
      const of = paired.filter((r) => r.mode === mode && r.backends === backends);
      const each = (f: (r: (typeof of)[number]) => number) => of.map(f);
      // Medians and ranges over the rounds of one baseline's ratios and costs.
      const versus = (pick: (r: (typeof of)[number]) => ReturnType<typeof against>) => ({
        ratio: median(each((r) => pick(r).ratio)),
        ratioRange: range(each((r) => pick(r).ratio)),
        lbCpuMsPerRequest: median(each((r) => pick(r).lbCpuMsPerRequest)),
        costVsNginx: median(each((r) => pick(r).costVsNginx)),
        costRange: range(each((r) => pick(r).costVsNginx)),
      });
      return {
        mode,
        backends,
        rps: median(each((r) => r.rps)),
        failures: each((r) => r.failures).reduce((a, b) => a + b, 0),
        backlogDrops: each((r) => r.backlogDrops).reduce((a, b) => a + b, 0),
        cpuMsPerRequest: median(each((r) => r.cpuMsPerRequest)),
        stealMsPerRequest: median(each((r) => r.stealMsPerRequest)),
        ...versus((r) => r),
        random: versus((r) => r.random),
      };
    }),
  );
  const isBaseline = (m: Mode) => (BASELINES as readonly Mode[]).includes(m);
  // Where each way's CPU went, per backend count: median ms per request over the rounds, by group.
  const breakdown = counts.flatMap((backends) => {
    const of = (mode: Mode) => runs.filter((r) => r.mode === mode && r.backends === backends);
    const groups = [...new Set(runs.flatMap((r) => Object.keys(r.where)))]
      .filter((g) => runs.some((r) => r.backends === backends && (r.where[g] ?? 0) >= BREAKDOWN_MIN_MS))
      .map((group) => ({
        group,
        ms: Object.fromEntries(
          MODES.map((m) => [m, median(of(m).map((r) => r.where[group] ?? 0))]),
        ) as Record<Mode, number>,
      }))
      .sort((a, b) => b.ms["portable-lb"] - a.ms["portable-lb"] || a.group.localeCompare(b.group));
    const width = Math.max(5, ...groups.map((g) => g.group.length));
    const ms = (v: number) => v.toFixed(3).padStart(14);
    return [
      "",
      `where the busy CPU went with ${backends} backend(s), ms per request (medians over the rounds):`,
      `${"group".padEnd(width)}  ${MODES.map((m) => m.padStart(14)).join("")}  ${"lb - direct".padStart(14)}${"nginx - direct".padStart(15)}`,
      ...groups.map(
        (g) =>
          `${g.group.padEnd(width)}  ${MODES.map((m) => ms(g.ms[m])).join("")}  ${ms(g.ms["portable-lb"] - g.ms.direct)}${ms(g.ms.nginx - g.ms.direct).padStart(15)}`,
      ),
    ];
  });
  const text = [
    "portable-lb on the lab: throughput vs backend pods (cf. thesis Fig. 6.4)",
    `machine: ${machine.cpus} x ${machine.cpuModel} (client, LBs and pods share it: read the ratios)`,
    `portable-lb's data plane: ${lbMode}`,
    `${CONNECTIONS_PER_BACKEND} client connections per backend pod at a time, back to back (a new connection per request: the demo pods and nginx close them), ${seconds} s per run, ${rounds} round(s) of the four ways per backend count`,
    "figures: medians over the rounds; ratios and costs are taken within each round (range in brackets)",
    "busy CPU: the whole machine's (/proc/stat, steal apart) per request; LB cost: that minus direct-to-pod's",
    "direct: each client connection stays on one pod (an even, steady spread); direct-random: each new connection to a pod at random (a hash-based balancer's spread)",
    "steal: CPU time the hypervisor gave other guests meanwhile, per request (the host's noise, not counted as busy)",
    "targets (portable-lb): >= 0.9x direct's requests/s with dsr; LB cost <= 0.2x nginx's (against either baseline below)",
    "",
    "backends  mode          requests/s  ratio to direct (range)  failures  backlog drops  busy CPU ms/req  steal ms/req  LB cost ms/req  cost vs nginx (range)",
    ...rows.map((r) =>
      [
        String(r.backends).padStart(8),
        r.mode.padEnd(12),
        r.rps.toFixed(0).padStart(11),
        `${r.ratio.toFixed(2)} (${r.ratioRange})`.padStart(24),
        String(r.failures).padStart(9),
        String(r.backlogDrops).padStart(13),
        r.cpuMsPerRequest.toFixed(3).padStart(15),
        r.stealMsPerRequest.toFixed(3).padStart(12),
        (isBaseline(r.mode) ? "-" : r.lbCpuMsPerRequest.toFixed(3)).padStart(14),
        (r.mode === "portable-lb" ? `${r.costVsNginx.toFixed(2)} (${r.costRange})` : "-").padStart(21),
      ].join("  "),
    ),
    "",
    "against direct-random (each connection to a pod at random, as behind the VIP and nginx):",
    "backends  mode          ratio to direct-random (range)  LB cost ms/req  cost vs nginx (range)",
    ...rows
      .filter((r) => !isBaseline(r.mode))
      .map((r) =>
        [
          String(r.backends).padStart(8),
          r.mode.padEnd(12),
          `${r.random.ratio.toFixed(2)} (${r.random.ratioRange})`.padStart(31),
          r.random.lbCpuMsPerRequest.toFixed(3).padStart(14),
          (r.mode === "portable-lb"
            ? `${r.random.costVsNginx.toFixed(2)} (${r.random.costRange})`
            : "-"
          ).padStart(21),
        ].join("  "),
      ),
    ...breakdown,
  ].join("\n");
  await writeRunFiles(runDir, {
    report: text,
    summary: {
      machine,
      lbMode,
      seconds,
      rounds,
      connectionsPerBackend: CONNECTIONS_PER_BACKEND,
      rows,
      runs: paired,
    },
    csv: {
      name: "results.csv",
      header:
        "mode,backends,requests_per_s,ratio_to_direct,failures,busy_cpu_ms_per_request,lb_cpu_ms_per_request,ratio_to_direct_random,lb_cpu_ms_per_request_vs_random",
      rows: rows.map(
        (r) =>
          `${r.mode},${r.backends},${r.rps.toFixed(1)},${r.ratio.toFixed(3)},${r.failures},${r.cpuMsPerRequest.toFixed(4)},${r.lbCpuMsPerRequest.toFixed(4)},${r.random.ratio.toFixed(3)},${r.random.lbCpuMsPerRequest.toFixed(4)}`,
      ),
    },
    chart: {
      name: "throughput",
      spec: {
        title: "Lab: requests/s vs backend pods (cf. thesis Fig. 6.4)",
        width: 560,
        height: 320,
        data: { values: rows },
        mark: { type: "line", point: true },
        encoding: {
          x: { field: "backends", type: "ordinal", title: "backend pods" },
          y: { field: "rps", type: "quantitative", title: "requests/s" },
          color: { field: "mode", title: "path" },
        },
      },
    },
  });
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
