// Steady load from a namespace across an event (an LB pod leaving or joining, for the BGP tests and
// benchmarks): one or more runs of the load client (bench/lib/keepAliveClient.ts: keep-alive
// connections, or a new connection per request) start before the event, go on through it and for
// a while after, and what each measured is handed back with the event's time.
import { setTimeout as sleep } from "node:timers/promises";
import { runLoad, type LoadOptions, type LoadResult } from "../../../bench/lib/loadClient.ts";

export type LoadAcrossOptions = Omit<LoadOptions, "seconds" | "stop">;

export interface LoadAcrossResult<K extends string> {
  /** When the event began (epoch ms). */
  at: number;
  results: Record<K, LoadResult>;
}

/**
 * Runs `loads` in `netns` (each its own client process) for `beforeMs`, then `event`, then
 * `afterMs` more; the clients stop then, or when the event fails. Throws when a client had answered
 * nothing in the second before the event: its connections were not open across it.
 */
export async function loadAcross<K extends string>(
  netns: string,
  loads: Record<K, LoadAcrossOptions>,
  event: () => Promise<unknown>,
  { beforeMs = 2_000, afterMs = 3_000, maxSeconds = 300 } = {},
): Promise<LoadAcrossResult<K>> {
  const stop = new AbortController();
  const entries = Object.entries(loads) as [K, LoadAcrossOptions][];
  // An upper bound: the clients are stopped once the event is over.
  const runs = entries.map(([, o]) => runLoad(netns, { ...o, seconds: maxSeconds, stop: stop.signal }));
  let at: number;
  try {
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
    const second = Math.floor((at - r.started) / 1000) - 1;
    if (!(r.perSecond[second]! > 0))
      throw new Error(
        `load ${k}: no request answered in the second before the event (${JSON.stringify(r.perSecond)}): ` +
          "its client was not running yet; raise beforeMs",
      );
  }
  return { at, results };
}
