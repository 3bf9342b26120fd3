// Throughput against the number of backend pods, on the lab (the thesis's Fig. 6.4): the client
// sends requests back to back to the demo web service three ways, on a new connection each (the
// demo pods' busybox httpd closes every connection after its answer):
//   portable-lb  the VIP: router ECMP over the LB nodes, nftables in the LB pods
//   direct       the pods' own addresses, the client spreading its connections over them (no LB)
//   nginx        nginx as the load balancer on an LB node (proxying to the pods; the thesis's baseline)
// nginx closes its client connections after each answer too (keepalive_timeout 0): kept alive, they
// would spare the client the handshakes the other two ways pay, and measure that instead of the LB.
// This machine has two CPUs shared by the client, the LBs and the pods, so absolute figures say
// little; the report gives each way's ratio to direct-to-pod at the same backend count, and what
// the load balancing itself costs: the whole machine's busy CPU per request (/proc/stat, over each
// run) minus direct-to-pod's, and that cost as a share of nginx's. portable-lb runs in the lab's
// data-plane mode (named in the report): once per mode sets DSR and SNAT side by side.
// The machine's own noise is as large as the differences, so each backend count runs in rounds:
// every round runs the three ways back to back (in a rotated order), the ratios are taken within a
// round, and the report gives their median and range over the rounds.
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:lab-throughput -- [--backends 1,2,3,6] [--seconds 10] [--rounds 3]
//   PLB_LAB_MODE=snat npm run lab && npm run --silent lab -- outputs | npm run bench:lab-throughput
//
// For `direct` the router gets routes to the nodes' pod subnets for the run (removed after), as a
// flat routed network would have. Writes results.csv, summary.json, report.txt and throughput.png
// under bench/results/lab-throughput-<time>/.
import { existsSync, globSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { DEMO_PORT, instancesRoot, labNamespace, type ProcessRecord, stopRecorded } from "@portable-lb/lab";
import { busyDuring } from "./lib/busyCpu.ts";
import { progress } from "./lib/benchSetup.ts";
import { dataPlaneMode, demoReplicas, labRig, scaleDemo, type LabRig } from "./lib/labRig.ts";
import { runLoad } from "./lib/loadClient.ts";
import { percentile } from "./lib/stats.ts";
import { machineInfo } from "./lib/report.ts";
import { newRunDir, writeRunFiles } from "./lib/runFiles.ts";

const BENCH_DIR = dirname(resolve(process.argv[1]!));
const BACKEND_PORT = DEMO_PORT;
const NGINX_PORT = 8081;
const CONNECTIONS = 32;
const MODES = ["portable-lb", "direct", "nginx"] as const;
type Mode = (typeof MODES)[number];
interface Run {
  mode: Mode;
  backends: number;
  round: number;
  rps: number;
  failures: number;
  cpuMsPerRequest: number;
}

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
    "    keepalive 64;",
    "  }",
    "  server {",
    `    listen ${NGINX_PORT};`,
    '    location / { proxy_pass http://backends; proxy_http_version 1.1; proxy_set_header Connection ""; }',
    "  }",
    "}",
    "",
  ].join("\n");
}

/** Requests per second of back-to-back load from the client to `urls` for `seconds`. */
async function load(
  rig: LabRig,
  urls: string[],
  seconds: number,
): Promise<{ rps: number; failures: number; cpuMsPerRequest: number }> {
  const { result: r, busyS } = await busyDuring(() =>
    runLoad(rig.plan.client.netns, { urls, connections: CONNECTIONS, seconds, intervalMs: 0 }),
  );
  return {
    rps: r.requests / seconds,
    failures: r.failures.length,
    cpuMsPerRequest: (1000 * busyS) / Math.max(1, r.requests),
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
        nginx: [`http://${lbNode.ip}:${NGINX_PORT}/`],
      };
      for (let round = 0; round < rounds; round++) {
        // Rotated, so that no way always runs first (on a machine still settling) or last.
        for (const mode of MODES.map((_, i) => MODES[(i + round) % MODES.length]!)) {
          const r = await load(rig, urls[mode], seconds);
          runs.push({ mode, backends: count, round, ...r });
          progress(
            `  round ${round + 1} ${mode.padEnd(12)} ${r.rps.toFixed(0).padStart(6)} requests/s, ${r.failures} failures`,
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
  // Per run, against the direct-to-pod run of its own round.
  const paired = runs.map((r) => {
    const direct = at("direct", r.backends, r.round);
    // What balancing adds per request: its run's busy CPU per request beyond direct-to-pod's.
    const lbCpuMs = (x: Run) => x.cpuMsPerRequest - direct.cpuMsPerRequest;
    return {
      ...r,
      ratio: r.rps / direct.rps,
      lbCpuMsPerRequest: lbCpuMs(r),
      costVsNginx: lbCpuMs(r) / lbCpuMs(at("nginx", r.backends, r.round)),
    };
  });
  const rows = counts.flatMap((backends) =>
    MODES.map((mode) => {
      const of = paired.filter((r) => r.mode === mode && r.backends === backends);
      const each = (f: (r: (typeof of)[number]) => number) => of.map(f);
      return {
        mode,
        backends,
        rps: median(each((r) => r.rps)),
        failures: each((r) => r.failures).reduce((a, b) => a + b, 0),
        cpuMsPerRequest: median(each((r) => r.cpuMsPerRequest)),
        ratio: median(each((r) => r.ratio)),
        ratioRange: range(each((r) => r.ratio)),
        lbCpuMsPerRequest: median(each((r) => r.lbCpuMsPerRequest)),
        costVsNginx: median(each((r) => r.costVsNginx)),
        costRange: range(each((r) => r.costVsNginx)),
      };
    }),
  );
  const text = [
    "portable-lb on the lab: throughput vs backend pods (cf. thesis Fig. 6.4)",
    `machine: ${machine.cpus} x ${machine.cpuModel} (client, LBs and pods share it: read the ratios)`,
    `portable-lb's data plane: ${lbMode}`,
    `${CONNECTIONS} client connections at a time, back to back (a new connection per request: the demo pods and nginx close them), ${seconds} s per run, ${rounds} round(s) of the three ways per backend count`,
    "figures: medians over the rounds; ratios and costs are taken within each round (range in brackets)",
    "busy CPU: the whole machine's (/proc/stat) per request; LB cost: that minus direct-to-pod's",
    "targets (portable-lb): >= 0.9x direct's requests/s with dsr; LB cost <= 0.2x nginx's",
    "",
    "backends  mode          requests/s  ratio to direct (range)  failures  busy CPU ms/req  LB cost ms/req  cost vs nginx (range)",
    ...rows.map((r) =>
      [
        String(r.backends).padStart(8),
        r.mode.padEnd(12),
        r.rps.toFixed(0).padStart(11),
        `${r.ratio.toFixed(2)} (${r.ratioRange})`.padStart(24),
        String(r.failures).padStart(9),
        r.cpuMsPerRequest.toFixed(3).padStart(15),
        (r.mode === "direct" ? "-" : r.lbCpuMsPerRequest.toFixed(3)).padStart(14),
        (r.mode === "portable-lb" ? `${r.costVsNginx.toFixed(2)} (${r.costRange})` : "-").padStart(21),
      ].join("  "),
    ),
  ].join("\n");
  await writeRunFiles(runDir, {
    report: text,
    summary: { machine, lbMode, seconds, rounds, connections: CONNECTIONS, rows, runs: paired },
    csv: {
      name: "results.csv",
      header:
        "mode,backends,requests_per_s,ratio_to_direct,failures,busy_cpu_ms_per_request,lb_cpu_ms_per_request",
      rows: rows.map(
        (r) =>
          `${r.mode},${r.backends},${r.rps.toFixed(1)},${r.ratio.toFixed(3)},${r.failures},${r.cpuMsPerRequest.toFixed(4)},${r.lbCpuMsPerRequest.toFixed(4)}`,
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
