// The reconcile benchmark's figures as a plain-text report, with the targets beside them.
import { CONTROLLER_MEMORY } from "@portable-lb/core/config";
import { cpus, loadavg, release, totalmem } from "node:os";
import { execCommand } from "@portable-lb/lab";
import type { Memory } from "./controllerUnderTest.ts";
import type { Summary } from "./stats.ts";

export interface Sample {
  change: number;
  service: number;
  endpoint: number;
  /** The endpoint's ready condition after the change. */
  ready: boolean;
  /** The API write alone (request to response). */
  writeMs: number;
  /** From just before the write to the controller's "data plane updated". */
  latencyMs: number;
  /** The kernel's rule checked afterwards (some of the changes): true if it matched. */
  verified: boolean | undefined;
}

export type ControllerMemory = Memory & { heapUsed: number; heapTotal: number };

export interface SizeResult {
  services: number;
  endpoints: number;
  create: { services: number; seconds: number; perSecond: number };
  /** Controller start to all services programmed, on a fresh network namespace. */
  syncSeconds: number;
  /** The same on a namespace that already holds the rules (adopted, none changed). */
  restartSeconds: number;
  restartRuleChanges: number;
  changes: number;
  timeouts: number;
  latencyMs: Summary;
  writeMs: Summary;
  /** The controller's own reconcile histogram over the changes (trigger to applied). */
  histogram: { runs: number; meanMs: number; p50Ms: number; p99Ms: number };
  memory: { afterSync: ControllerMemory; afterLoad: ControllerMemory; afterRestart: ControllerMemory };
  kernelChecks: { checked: number; mismatches: number };
  samples: Sample[];
}

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  node: string;
  kernel: string;
  nft: string;
  /** 1-minute load average when the run started and ended: others share these cores. */
  loadStart: number;
  loadEnd?: number;
}

export async function machineInfo(): Promise<MachineInfo> {
  const nft = await execCommand("nft", ["--version"]);
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? "unknown",
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kernel: release(),
    nft: nft.stdout.trim() || "unknown",
    loadStart: loadavg()[0]!,
  };
}

/** The targets, by number of Services. */
const TARGETS: { services: number; p99Ms: number; rssMb?: number }[] = [
  { services: 1_000, p99Ms: 100 },
  { services: 10_000, p99Ms: 1_000, rssMb: 300 },
];

const MB = 2 ** 20;
const ms = (x: number) => (Number.isNaN(x) ? "-" : x < 10 ? x.toFixed(1) : x.toFixed(0));
const mb = (x: number) => (Number.isNaN(x) ? "-" : (x / MB).toFixed(0));
const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL");

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => cell.padStart(widths[c]!)).join("  ")).join("\n");
}

export function formatReport(m: MachineInfo, results: SizeResult[]): string {
  const lines = [
    "portable-lb controller benchmark: EndpointSlice write -> rules applied (nftables, one endpoint flipped per change)",
    `machine: ${m.cpus} x ${m.cpuModel}, ${m.memoryGb} GB; Node ${m.node}; kernel ${m.kernel}; ${m.nft}`,
    `controller: node ${CONTROLLER_MEMORY.nodeOptions} (as in the pod, whose memory limit is ${CONTROLLER_MEMORY.limitMi} MiB)`,
    `load average (1 min): ${m.loadStart.toFixed(1)} at start, ${m.loadEnd?.toFixed(1) ?? "?"} at end ` +
      `(other work shares the cores: absolute figures are noisy, compare ratios)`,
    "",
    "latency, ms (write -> controller's log line; hist = controller's own reconcile histogram, trigger -> applied)",
    table([
      [
        "services",
        "endpoints",
        "changes",
        "p50",
        "p90",
        "p99",
        "max",
        "hist p50",
        "hist p99",
        "API write p50",
        "timeouts",
      ],
      ...results.map((r) => [
        String(r.services),
        String(r.endpoints),
        String(r.latencyMs.count),
        ms(r.latencyMs.p50),
        ms(r.latencyMs.p90),
        ms(r.latencyMs.p99),
        ms(r.latencyMs.max),
        ms(r.histogram.p50Ms),
        ms(r.histogram.p99Ms),
        ms(r.writeMs.p50),
        String(r.timeouts),
      ]),
    ]),
    "",
    "sync and memory (controller process alone; RSS from /proc, heap from its /metrics)",
    table([
      [
        "services",
        "created/s",
        "sync s",
        "restart s",
        "restart changes",
        "RSS MB",
        "peak RSS MB",
        "heap MB",
        "RSS after restart MB (lazily freed)",
        "kernel checks",
      ],
      ...results.map((r) => [
        String(r.services),
        r.create.services ? r.create.perSecond.toFixed(0) : "-",
        r.syncSeconds.toFixed(1),
        r.restartSeconds.toFixed(1),
        String(r.restartRuleChanges),
        mb(r.memory.afterLoad.rss),
        mb(r.memory.afterLoad.peakRss),
        mb(r.memory.afterLoad.heapUsed),
        `${mb(r.memory.afterRestart.rss)} (${mb(r.memory.afterRestart.lazyFree)})`,
        `${r.kernelChecks.checked - r.kernelChecks.mismatches}/${r.kernelChecks.checked} ok`,
      ]),
    ]),
    "",
    "targets",
  ];
  for (const t of TARGETS) {
    const r = results.find((x) => x.services === t.services);
    if (!r) {
      lines.push(`  ${t.services} Services: not run`);
      continue;
    }
    const ok = r.latencyMs.p99 < t.p99Ms && r.timeouts === 0;
    lines.push(`  p99 < ${t.p99Ms} ms at ${t.services} Services: ${ms(r.latencyMs.p99)} ms ${verdict(ok)}`);
    if (t.rssMb !== undefined) {
      const { rss, peakRss } = r.memory.afterLoad;
      lines.push(
        `  memory < ${t.rssMb} MB at ${t.services} Services: RSS ${mb(rss)} MB after the load ` +
          `${verdict(rss < t.rssMb * MB)}; peak ${mb(peakRss)} MB ${verdict(peakRss < t.rssMb * MB)}`,
      );
    }
  }
  const failedChecks = results.reduce((n, r) => n + r.kernelChecks.mismatches, 0);
  if (failedChecks) lines.push(`  WARNING: ${failedChecks} kernel rule checks did not match the change`);
  return lines.join("\n");
}
