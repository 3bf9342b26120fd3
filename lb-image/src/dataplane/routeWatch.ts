// `ip monitor` in the LB pod's network namespace: news of every change to what the route checks
// read (links, IPv4 routes and rules, the DSR device's neighbour), so that the DSR tunnels
// (dsr/lbTunnels.ts) and the local VIP routes (localVips.ts) are read back and repaired when
// something changes instead of every second. While the monitor listens, their periodic read-back is
// only a safety net; while it does not (not started, or waiting to be restarted), they keep their
// unwatched pace.
import { CommandMonitor } from "../common/commandMonitor.ts";
import { DSR_LB_DEVICE } from "./dsr/dsrTunnel.ts";

/**
 * The safety net's interval while the monitor listens. The kernel reports every change to these
 * objects, and a monitor that lost some (a netlink buffer overrun, which `ip monitor` reports on
 * stderr and survives) or restarted counts as a change: the net covers only what nobody foresaw,
 * so it is as slow as the node agent's (30 s) and costs two `ip` runs per 30 s.
 */
export const ROUTES_WATCHED_CHECK_MS = 30_000;

// With `label`, each event's first line starts with its kind; continuation lines are indented.
const EVENT = /^\[(LINK|ROUTE|RULE|NEIGH)\]/;

export class RouteWatch {
  private readonly monitor: CommandMonitor;
  private readonly watchedMs: number;
  /** When the last change (or possible unseen one) was heard of (performance.now()). */
  private changedAt = -Infinity;
  private onChange: () => void = () => undefined;

  constructor(ip: [string, ...string[]], o: { watchedMs?: number; onError?: (err: Error) => void } = {}) {
    this.watchedMs = o.watchedMs ?? ROUTES_WATCHED_CHECK_MS;
    this.monitor = new CommandMonitor({
      command: [...ip, "-4", "monitor", "label", "link", "route", "rule", "neigh"],
      onStart: () => this.changed(),
      onLine: (line) => {
        const kind = EVENT.exec(line)?.[1];
        // Neighbours come and go on every link with traffic: only the tunnel's own one counts.
        if (kind && (kind !== "NEIGH" || line.includes(` dev ${DSR_LB_DEVICE} `))) this.changed();
      },
      onStderr: () => this.changed(),
      ...(o.onError && { onError: o.onError }),
    });
  }

  /** Its command runs now: no change goes unreported. */
  get live(): boolean {
    return this.monitor.live;
  }

  /** Starts listening; `onChange` is called on each change heard of (and at each (re)start). */
  start(onChange: () => void): void {
    this.onChange = onChange;
    this.monitor.start();
  }

  stop(): void {
    this.monitor.stop();
    this.onChange = () => undefined;
  }

  /**
   * Whether a read-back begun at `readAt` (performance.now()) is due again: something changed since
   * it began, or its interval passed (the safety net's while the monitor listens, else `unwatchedMs`).
   */
  due(readAt: number, unwatchedMs: number, now = performance.now()): boolean {
    return this.changedAt >= readAt || now - readAt >= (this.live ? this.watchedMs : unwatchedMs);
  }

  private changed(): void {
    this.changedAt = performance.now();
    this.onChange();
  }
}

/** Whether a route read-back begun at `readAt` is due again, with or without a watch. */
export function routesDue(
  watch: RouteWatch | undefined,
  readAt: number,
  unwatchedMs: number,
  now = performance.now(),
): boolean {
  return watch ? watch.due(readAt, unwatchedMs, now) : now - readAt >= unwatchedMs;
}
