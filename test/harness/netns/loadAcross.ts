// Steady load from a namespace across an event (an LB pod leaving or joining, for the BGP tests and
// benchmarks): one or more runs of the load client (bench/lib/keepAliveClient.ts: keep-alive
// connections, or a new connection per request) start before the event, go on through it and for
// a while after, and what each measured is handed back with the event's time.
import { setTimeout as sleep } from "node:timers/promises";
import { execCommand, waitUntil } from "@portable-lb/lab";
import { runLoad, type LoadOptions, type LoadResult } from "../../../bench/lib/loadClient.ts";

export type LoadAcrossOptions = Omit<LoadOptions, "seconds" | "stop">;

export interface LoadAcrossResult<K extends string> {
  /** When the event began (epoch ms). */
  at: number;
  results: Record<K, LoadResult>;
}

/** The TCP connections established in `netns`. */
async function established(netns: string): Promise<number> {
  const r = await execCommand("ip", ["netns", "exec", netns, "ss", "-Htn", "state", "established"]);
  return r.stdout.split("\n").filter((l) => l.trim() !== "").length;
}

/**
 * Runs `loads` in `netns` (each its own client process): once every keep-alive connection is open
 * (a client process takes a second or more to start on a busy machine), `beforeMs` more, then
 * `event`, then `afterMs` more; the clients stop then, or when the event fails. Throws when a
 * client had answered nothing before the event.
 */
export async function loadAcross<K extends string>(
  netns: string,
  loads: Record<K, LoadAcrossOptions>,
  event: () => Promise<unknown>,
  { beforeMs = 2_000, afterMs = 3_000, maxSeconds = 300 } = {},
): Promise<LoadAcrossResult<K>> {
  const stop = new AbortController();
  const entries = Object.entries(loads) as [K, LoadAcrossOptions][];
  const kept = entries.reduce((n, [, o]) => n + (o.fresh || o.trickleMs ? 0 : o.connections), 0);
  // An upper bound: the clients are stopped once the event is over.
  const runs = entries.map(([, o]) => runLoad(netns, { ...o, seconds: maxSeconds, stop: stop.signal }));
  let at: number;
  try {
    if (!(await waitUntil(async () => (await established(netns)) >= kept, 30_000, 100)))
      throw new Error(`loadAcross: ${kept} keep-alive connections were not open within 30 s`);
    await sleep(beforeMs);
    at = Date.now();
    await event();
    await sleep(afterMs);
  } finally {
    stop.abort();
    // Settled either way: a client's own error must not hide the event's.
    await Promise.allSettled(runs);
  }
  const done = await Promise.all(runs);
  const results = Object.fromEntries(entries.map(([k], i) => [k, done[i]!])) as Record<K, LoadResult>;
  for (const [k, r] of Object.entries(results) as [K, LoadResult][]) {
    const before = r.perSecond.slice(0, Math.floor((at - r.started) / 1000)).reduce((n, c) => n + c, 0);
    if (before === 0)
      throw new Error(
        `load ${k}: no request answered before the event (${JSON.stringify(r.perSecond)}): raise beforeMs`,
      );
  }
  return { at, results };
}
