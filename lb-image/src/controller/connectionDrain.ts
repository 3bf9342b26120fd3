// The pod's last act: after its VIPs are withdrawn, the router keeps sending new flows here until it
// has applied the withdrawal (through a reflector: p99 0.4 s, max 0.5 s measured by the BGP bench),
// and flows it sent are still open. The pod's network namespace goes when its last container exits,
// so exiting at once would blackhole both. The controller instead serves on until no new connection
// has arrived for a quiet period (the router has moved new flows to the other LBs), bounded.
// Watching the traffic rather than sleeping a fixed time adapts to a slow router and still lets an
// idle pod go after the quiet period.

export interface QuietWaitOptions {
  /** The data plane's count of connections taken so far (all VIPs); only its changes matter. */
  connections: () => Promise<number>;
  /** No new connection for this long ends the wait. At least the engine's counter lag (IPVS: 2 s). */
  quietMs: number;
  /** The wait ends after this long even if connections still arrive. */
  timeoutMs: number;
  pollMs?: number;
  /** Counter read failures (the wait goes on: an unreadable counter is not a quiet one). */
  onError?: (err: unknown) => void;
}

export interface QuietWaitResult {
  /** True when the quiet period was reached, false when the timeout ended the wait. */
  quiet: boolean;
  waitedMs: number;
  /** New connections seen during the wait. */
  connections: number;
}

export async function waitForQuiet(o: QuietWaitOptions): Promise<QuietWaitResult> {
  const pollMs = o.pollMs ?? 250;
  const started = Date.now();
  const read = () =>
    o.connections().catch((err: unknown) => {
      o.onError?.(err);
      return undefined;
    });
  let last = await read();
  let lastChange = started;
  let connections = 0;
  for (;;) {
    const now = Date.now();
    if (now - lastChange >= o.quietMs) return { quiet: true, waitedMs: now - started, connections };
    if (now - started >= o.timeoutMs) return { quiet: false, waitedMs: now - started, connections };
    await new Promise((r) => setTimeout(r, Math.min(pollMs, o.timeoutMs - (now - started))));
    const count = await read();
    // A failed read, or the first good one after it, counts as activity: the pod cannot tell that
    // nothing arrived. A counter that went down was reset (rules remade), which is activity too.
    if (count === undefined || last === undefined || count !== last) lastChange = Date.now();
    if (count !== undefined && last !== undefined && count > last) connections += count - last;
    last = count;
  }
}
