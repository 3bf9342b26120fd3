// One fault on the running lab, measured: steady requests from the client to the VIP (each on a
// new connection, one after another every 50 ms, so a change of the router's next hops can cost at
// most the request in flight) and the router's next hops against what each LB node delivers
// (PathWatch), from a healthy start, through the fault, until the lab is healthy again.
import { countCodes, runLoad, type LoadResult } from "../../../bench/lib/loadClient.ts";
import { type LabPlan, waitUntil } from "@portable-lb/lab";
import { PathWatch, settledAt, undeliverableMs, type PathSample } from "./pathWatch.ts";

export interface FaultReport {
  fault: string;
  /** Requests sent from the fault on, and how many failed. */
  requests: number;
  failed: number;
  /** Failures by error code. */
  errors: Record<string, number>;
  /** From the fault until the lab is healthy again for good (undefined: it never was). */
  repairMs: number | undefined;
  /** How long the router pointed at an LB node that did not deliver. */
  undeliverableMs: number;
  samples: PathSample[];
  /** The router's next hops and the delivering nodes, each time they changed, from the fault on. */
  timeline: string;
}

export interface FaultOptions {
  fault: string;
  /** Breaks something; may also wait for the lab's reaction (its time counts as the fault's). */
  inject: () => Promise<void>;
  /** The healthy state to come back to (default: every LB node in the route, each delivering). */
  healthy?: (s: PathSample) => boolean;
  /** How long the healthy state must hold to count as repaired. */
  holdMs?: number;
  timeoutMs: number;
}

const LOAD_INTERVAL_MS = 50;

export async function runFault(plan: LabPlan, vip: string, o: FaultOptions): Promise<FaultReport> {
  const all = plan.nodes
    .filter((n) => n.role === "lb")
    .map((n) => n.ip)
    .sort();
  const healthy =
    o.healthy ?? ((s: PathSample) => s.hops.join() === all.join() && s.delivering.join() === all.join());
  const holdMs = o.holdMs ?? 2_000;
  const watch = await PathWatch.start(plan, vip);
  const stop = new AbortController();
  const load: Promise<LoadResult> = runLoad(plan.client.netns, {
    urls: [`http://${vip}/`],
    connections: 1,
    intervalMs: LOAD_INTERVAL_MS,
    seconds: Math.ceil(o.timeoutMs / 1000) + 120,
    fresh: true,
    stop: stop.signal,
  });
  const loadStarted = Date.now();
  let from = loadStarted;
  let result: LoadResult;
  let samples: PathSample[];
  try {
    // A healthy start: otherwise the fault's figures would carry the previous one's.
    const last = () => watch.samples.at(-1) ?? { t: 0, hops: [], delivering: [] };
    if (!(await waitUntil(() => healthy(last()), 60_000, 100)))
      throw new Error(`${o.fault}: the lab is not healthy before the fault: ${JSON.stringify(last())}`);
    // The load client's own start (a Node process) must be behind us too.
    await new Promise((r) => setTimeout(r, Math.max(0, loadStarted + 3_000 - Date.now())));
    from = Date.now();
    await o.inject();
    await waitUntil(
      () => {
        const at = settledAt(
          watch.samples.filter((s) => s.t >= from),
          healthy,
        );
        return at !== undefined && (watch.samples.at(-1)?.t ?? 0) - at >= holdMs;
      },
      o.timeoutMs,
      200,
    );
  } finally {
    stop.abort();
    [result, samples] = await Promise.all([load, watch.stop()]);
  }
  const after = samples.filter((s) => s.t >= from);
  const failures = result.failures.filter((f) => f.t >= from);
  const settled = settledAt(after, healthy);
  // Answered requests per second of the load's run, from the fault's second on, and the failures.
  const answered = result.perSecond
    .slice(Math.max(0, Math.floor((from - result.started) / 1000)))
    .reduce((n, c) => n + c, 0);
  return {
    fault: o.fault,
    requests: answered + failures.length,
    failed: failures.length,
    errors: countCodes(failures),
    repairMs: settled === undefined ? undefined : settled - from,
    undeliverableMs: undeliverableMs(after),
    samples: after,
    timeline: timeline(after, from),
  };
}

/** "+0.0 s route 3 deliver 3, +41.2 s route 2 deliver 3, …": each change of the samples. */
function timeline(samples: PathSample[], from: number): string {
  const short = (ips: string[]) => ips.map((ip) => ip.split(".").at(-1)).join(",") || "-";
  const steps: string[] = [];
  let last = "";
  for (const s of samples) {
    const now = `route ${short(s.hops)} deliver ${short(s.delivering)}`;
    if (now !== last) steps.push(`+${((s.t - from) / 1000).toFixed(1)} s ${now}`);
    last = now;
  }
  return steps.join(", ");
}

/** The reports as a table for the test's output (and the issue's closing note). */
export function formatReports(reports: FaultReport[]): string {
  const rows = reports.map(
    (r) =>
      `| ${r.fault} | ${r.failed} of ${r.requests} | ${r.repairMs === undefined ? "never" : `${(r.repairMs / 1000).toFixed(1)} s`} | ${r.undeliverableMs} ms | ${Object.entries(
        r.errors,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")} |`,
  );
  return [
    "| fault | failed requests | healthy again after | router → non-delivering node | errors |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}
