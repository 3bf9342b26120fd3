// Keeps the speaker's announcements equal to what this pod can deliver (announceDecision.ts), and
// keeps them fresh: it checks the node's route and the pod's readiness through the node agent
// (nodeRouteProbe.ts) and the sessions' BFD state every tick, re-decides whenever anything changes
// (the reconciler hands it new candidates at once), and renews the speaker's announcement lease
// only while its own view is fresh, so a dead or hung controller is withdrawn by the speaker's
// watchdog instead of leaving stale routes behind.
import { ANNOUNCEMENT_LEASE } from "@portable-lb/core/config/lbImage";
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import type { SkippedItem } from "../controller/desiredState.ts";
import {
  decideAnnouncements,
  probeSources,
  type AnnounceDecision,
  type Hold,
  type SessionGate,
} from "./announceDecision.ts";
import type { NodeRouteProbeOptions, NodeRouteProbeResult } from "./nodeRouteProbe.ts";

/**
 * What the Announcer drives: the speaker's config (SpeakerControl, whose drain also revokes the
 * lease) and the announcement lease (bgp/announcementLease.ts), renewed only while the Announcer
 * vouches for what BIRD holds.
 */
export interface AnnouncementTarget {
  announce(vips: string[], exportTo: string[]): Promise<unknown>;
  drain(timeoutMs: number): Promise<void>;
}
export interface RenewableLease {
  /** Vouches for what the BIRD of speaker instance `speaker` holds. */
  renew(speaker: string): Promise<void>;
}

export interface AnnouncerTiming {
  /** Between two checks of the path. */
  tickMs: number;
  connectTimeoutMs: number;
  answerTimeoutMs: number;
  /** Consecutive failed node-route checks that withdraw a pool's VIPs (one lost packet is not a loss). */
  failuresToWithdraw: number;
  /** How old the last completed check may be for the lease to be renewed (ANNOUNCEMENT_LEASE.renewMs apart). */
  staleAfterMs: number;
  /** A hold that lasts this long becomes a Warning Event on the pod (a join's holds pass quickly). */
  reportHoldAfterMs: number;
}

// A node's answer to its own pod takes well under a millisecond; 200 ms without one is a lost route,
// and two such checks in a row (~0.7 s at worst) withdraw. The lease outlives a slow tick.
export const DEFAULT_ANNOUNCER_TIMING: AnnouncerTiming = {
  tickMs: 150,
  connectTimeoutMs: 200,
  answerTimeoutMs: 300,
  failuresToWithdraw: 2,
  staleAfterMs: 1_500,
  reportHoldAfterMs: 15_000,
};

export interface AnnouncerOptions {
  pools: string[];
  reflectors: string[];
  podIp: string;
  nodeIp: string;
  nodeAgentPort: number;
  /** This pod, for Events. */
  pod: Pick<SkippedItem, "object" | "kind" | "uid">;
  target: AnnouncementTarget;
  lease: RenewableLease;
  /** Per reflector address: BGP established, BFD Up (one read of BIRD's state). */
  sessions: () => Promise<ReadonlyMap<string, SessionGate>>;
  /** The running speaker's id (undefined before one started): renewals name the one configured. */
  speakerInstance: () => Promise<string | undefined>;
  probe: (o: NodeRouteProbeOptions) => Promise<NodeRouteProbeResult>;
  registry: Registry;
  log: Logger;
  report: (problems: SkippedItem[]) => Promise<void>;
  timing?: Partial<AnnouncerTiming>;
}

interface PoolCheck {
  ok: boolean | undefined;
  failures: number;
  detail: string;
}

export class Announcer {
  private readonly o: AnnouncerOptions;
  private readonly t: AnnouncerTiming;
  private candidates: string[] = [];
  private readonly pools = new Map<string, PoolCheck>();
  private ready: boolean | undefined;
  private readyDetail = "";
  private sessions: ReadonlyMap<string, SessionGate> = new Map();
  private draining = false;
  private stopped = false;
  private lastTickAt = 0;
  private last: AnnounceDecision | undefined;
  /** The speaker the last tick saw running: decisions written after that reach its BIRD. */
  private speaker: string | undefined;
  /**
   * The speaker whose BIRD holds a decision of this Announcer (the last write succeeded): what the
   * lease vouches for. A restarted speaker's BIRD starts on an older config, and a failed write
   * leaves BIRD with what this pod may no longer deliver: neither is vouched for.
   */
  private vouchedFor: string | undefined;
  /** Since when each hold (reason + subject) has held. */
  private readonly holdSince = new Map<string, number>();
  private loop: Promise<void> | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private readonly gauges: { announced: Gauge; routeOk: Gauge; ready: Gauge; exporting: Gauge; holds: Gauge };

  constructor(o: AnnouncerOptions) {
    this.o = o;
    this.t = { ...DEFAULT_ANNOUNCER_TIMING, ...o.timing };
    const registers = [o.registry];
    this.gauges = {
      announced: new Gauge({
        name: "portable_lb_announced_vips",
        help: "VIPs this LB pod announces over BGP (0 while draining or in cloud-routes mode)",
        registers,
      }),
      routeOk: new Gauge({
        name: "portable_lb_node_route_ok",
        help: "1 while the node's route of the VIP pool to this pod is verified through the data path",
        labelNames: ["pool"],
        registers,
      }),
      ready: new Gauge({
        name: "portable_lb_pod_ready_relayed",
        help: "This pod's Ready condition as the node agent relays it (1, 0; -1 while unknown)",
        registers,
      }),
      exporting: new Gauge({
        name: "portable_lb_session_exporting",
        help: "1 while the session to the route reflector carries the announcements (BFD Up where configured)",
        labelNames: ["peer"],
        registers,
      }),
      holds: new Gauge({
        name: "portable_lb_announcement_holds",
        help: "Reasons that hold announcements back now, by reason",
        labelNames: ["reason"],
        registers,
      }),
    };
  }

  /** The VIPs the data plane can serve now (verified, with a backend); decides again at once. */
  setCandidates(vips: string[]): void {
    this.candidates = [...vips];
    void this.decide();
  }

  start(): void {
    this.loop = this.run();
    this.leaseTimer = setInterval(() => void this.renewLease(), ANNOUNCEMENT_LEASE.renewMs);
  }

  /** Withdraws everything for good (preStop or SIGTERM) and waits (bounded) until it is out. */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    this.gauges.announced.set(0);
    await this.o.target.drain(timeoutMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.leaseTimer);
    await this.loop;
  }

  /** The last decision (tests, logs). */
  decision(): AnnounceDecision | undefined {
    return this.last;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const started = Date.now();
      try {
        await this.tick();
      } catch (err) {
        this.o.log.error({ err }, "announcement check failed; the lease is not renewed until one passes");
      }
      await new Promise((r) => setTimeout(r, Math.max(0, this.t.tickMs - (Date.now() - started))));
    }
  }

  private async tick(): Promise<void> {
    const sources = probeSources(this.candidates, this.o.pools);
    const [results, , sessions] = await Promise.all([
      Promise.all(
        [...sources].map(async ([pool, vip]) => {
          const result = await this.o.probe({
            nodeIp: this.o.nodeIp,
            port: this.o.nodeAgentPort,
            podIp: this.o.podIp,
            sourceVip: vip,
            connectTimeoutMs: this.t.connectTimeoutMs,
            answerTimeoutMs: this.t.answerTimeoutMs,
          });
          return [pool, result] as const;
        }),
      ),
      this.o.speakerInstance().then((s) => (this.speaker = s)),
      // BIRD not answering (not started yet, or hung) changes nothing: the last known state stands.
      this.o.sessions().catch((err: unknown) => {
        this.o.log.debug({ err }, "cannot read the BGP sessions");
        return this.sessions;
      }),
    ]);
    for (const pool of [...this.pools.keys()]) if (!sources.has(pool)) this.pools.delete(pool);
    for (const [pool, r] of results) this.record(pool, r);
    this.sessions = sessions;
    this.lastTickAt = Date.now();
    await this.decide();
  }

  private record(pool: string, r: NodeRouteProbeResult): void {
    const check = this.pools.get(pool) ?? { ok: undefined, failures: 0, detail: "" };
    const was = check.ok;
    if (r.route) {
      check.ok = true;
      check.failures = 0;
      // The node agent speaks for the pod, not for the pool: any answer is the pod's readiness.
      if (r.ready !== undefined && r.ready !== this.ready) {
        this.o.log.info({ ready: r.ready, detail: r.detail }, "the node agent relays this pod's readiness");
        this.ready = r.ready;
      }
      if (r.ready !== undefined) this.readyDetail = r.detail;
    } else {
      check.failures++;
      if (check.failures >= this.t.failuresToWithdraw || check.ok === undefined) check.ok = false;
    }
    check.detail = r.detail;
    this.pools.set(pool, check);
    if (was !== check.ok)
      this.o.log[check.ok ? "info" : "warn"](
        { pool, detail: r.detail },
        check.ok ? "the node routes the pool to this pod" : "the node does not route the pool to this pod",
      );
  }

  private async decide(): Promise<void> {
    const d = decideAnnouncements({
      candidates: this.candidates,
      pools: this.o.pools,
      nodeRoute: new Map([...this.pools].flatMap(([p, c]) => (c.ok === undefined ? [] : [[p, c.ok]]))),
      ready: this.ready,
      sessions: this.sessions,
      reflectors: this.o.reflectors,
      draining: this.draining,
    });
    this.observe(d);
    if (this.draining) return; // drain() owns the speaker from here on
    const speaker = this.speaker;
    try {
      await this.o.target.announce(d.vips, d.exportTo);
      if (this.last === d) this.vouchedFor = speaker;
    } catch (err) {
      // What BIRD holds is no longer what this pod can deliver: the lease lapses, and the speaker's
      // watchdog withdraws everything until a write succeeds.
      if (this.last === d) this.vouchedFor = undefined;
      this.o.log.error({ err }, "the speaker refused the announcements; withdrawing until it takes them");
    }
  }

  private observe(d: AnnounceDecision): void {
    const before = this.last;
    this.last = d;
    if (!before || before.vips.join() !== d.vips.join() || before.exportTo.join() !== d.exportTo.join()) {
      this.o.log.info({ vips: d.vips.length, exportTo: d.exportTo, holds: d.holds }, "announcements decided");
    }
    this.gauges.announced.set(d.vips.length);
    this.gauges.ready.set(this.ready === undefined ? -1 : this.ready ? 1 : 0);
    for (const [pool, c] of this.pools) this.gauges.routeOk.set({ pool }, c.ok ? 1 : 0);
    for (const r of this.o.reflectors) this.gauges.exporting.set({ peer: r }, d.exportTo.includes(r) ? 1 : 0);
    this.gauges.holds.reset();
    for (const h of d.holds) this.gauges.holds.inc({ reason: h.reason });
    this.reportLongHolds(d.holds);
  }

  private reportLongHolds(holds: Hold[]): void {
    const now = Date.now();
    const keys = new Set(holds.map((h) => `${h.reason}/${h.subject ?? ""}`));
    for (const k of [...this.holdSince.keys()]) if (!keys.has(k)) this.holdSince.delete(k);
    const problems: SkippedItem[] = [];
    for (const h of holds) {
      const key = `${h.reason}/${h.subject ?? ""}`;
      const since = this.holdSince.get(key) ?? now;
      this.holdSince.set(key, since);
      if (h.reason === "Draining" || now - since < this.t.reportHoldAfterMs) continue;
      problems.push({ ...this.o.pod, reason: h.reason, message: this.explain(h) });
    }
    if (problems.length) void this.o.report(problems);
  }

  private explain(h: Hold): string {
    switch (h.reason) {
      case "NodeRouteMissing":
        return `VIPs of pool ${h.subject} are not announced: node ${this.o.nodeIp} does not route the pool to this pod (${this.pools.get(h.subject ?? "")?.detail ?? "not checked yet"}); the node agent (portable-lb-node-agent) on this node makes that route once the pod is Ready: check that it runs, and its log`;
      case "NotReady":
        return `no VIP is announced: the node agent reports this pod not Ready (${this.readyDetail}); check the pod's readiness (/readyz) and its node's health`;
      case "BfdNotUp":
        return `VIPs are not exported to route reflector ${h.subject}: the BGP session is up but BFD is not, so the router could not notice this pod's loss before the hold time; check that the reflector runs BFD (bgp.bfd) and that UDP 3784 and 4784 pass between them`;
      default:
        return h.reason;
    }
  }

  private async renewLease(): Promise<void> {
    if (this.draining || this.stopped || this.vouchedFor === undefined) return;
    // A stuck check (or event loop) stops the renewals: the speaker's watchdog then withdraws.
    if (Date.now() - this.lastTickAt > this.t.staleAfterMs) return;
    await this.o.lease.renew(this.vouchedFor);
  }
}
