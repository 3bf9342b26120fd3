// Watches the speaker's BGP and BFD sessions through BIRD's control socket (BIRD has no push
// interface): per reflector, whether the BGP session is established and the BFD session Up and
// since when, as the controller's view and as metrics, and callbacks when an established session
// drops or a session cannot be established (a wrong AS number or password, an unreachable
// reflector), which the controller turns into Warning Events on its Pod. BIRD itself keeps
// retrying, backing off per `error wait time`; nothing here touches the data plane.
import { Counter, Gauge, type Registry } from "prom-client";
import type { BirdControl } from "./birdControl.ts";
import {
  parseBfdSessions,
  parseProtocols,
  protocolUp,
  reflectorSessions,
  type ReflectorSession,
} from "./birdOutput.ts";

export interface SessionMonitorOptions {
  bird: BirdControl;
  /** The route reflectors' addresses (the sessions' neighbors), in the config's order. */
  reflectors: readonly string[];
  registry: Registry;
  onDrop: (peer: string, info: string) => void;
  /** A session not established for `problemAfterMs`: what is wrong, as far as BIRD tells. */
  onProblem: (peer: string, problem: string) => void;
  intervalMs?: number;
  /** Default 10 s: a first connect, or a reconnect after BIRD's error wait, takes a few seconds. */
  problemAfterMs?: number;
}

/** What one poll saw: each reflector's sessions, and whether BIRD exports the VIPs at all. */
export interface SpeakerState {
  reflectors: ReflectorSession[];
  /**
   * BIRD's `vips` protocol is up: false while the speaker's watchdog holds every VIP back (the
   * announcement lease expired or was revoked); undefined when BIRD did not answer.
   */
  vipsEnabled?: boolean;
}

const PROBLEMS: [RegExp, string][] = [
  [
    /Bad peer AS|Bad AS/i,
    "the reflector refused this pod's AS number: bgp.asn must be the route reflectors' AS (the sessions are iBGP)",
  ],
  [
    /Connection refused/i,
    "nothing accepts BGP at that address: check that the route reflector runs and that bgp.routeReflectors lists its speaker-facing (pod network) address",
  ],
  [
    /unreachable|No route to host/i,
    "no route to the reflector from this pod: check bgp.routeReflectors and the pod network",
  ],
  [
    /Authentication|MD5|password/i,
    "authentication failed: bgp.passwordFile must hold the reflectors' BGP password",
  ],
  [
    /Connection closed|reset by peer/i,
    "the reflector closes the connection: it refuses this pod (its AS number, bgp.asn, or an address outside the reflector's speaker ranges); the reflector's log says which",
  ],
];
// An MD5 mismatch looks like silence: the peer's kernel drops every segment without a signature it accepts.
const NO_ANSWER =
  "no answer from the reflector: it is unreachable from this pod, or the BGP password (TCP MD5, bgp.passwordFile) differs from the reflectors', which makes it drop every packet silently";

/**
 * What an operator should check for a session that does not come up, from BIRD's info column
 * ("Active  Socket: Connection refused", "Idle  Received: Bad peer AS", …).
 */
export function sessionProblem(info: string): string {
  const seen = info.replace(/^\S+\s*/, "").trim() || info.trim();
  const hint = PROBLEMS.find(([pattern]) => pattern.test(info))?.[1] ?? NO_ANSWER;
  return `${hint} (BIRD: ${seen || "no state yet"})`;
}

export class SessionMonitor {
  private readonly o: SessionMonitorOptions;
  private readonly up: Gauge;
  private readonly bfdUp: Gauge;
  private readonly vipsEnabled: Gauge;
  private readonly changes: Counter;
  private readonly lastChange: Gauge;
  private readonly downFor: Gauge;
  /** Per reflector: established at the last poll. */
  private readonly last = new Map<string, boolean>();
  /** Since when each session has not been established (first poll, or when it dropped). */
  private readonly downSince = new Map<string, number>();
  /** The last info with an error detail per session: BIRD cycles Idle/Connect/Active between tries. */
  private readonly lastError = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(o: SessionMonitorOptions) {
    this.o = o;
    const registers = [o.registry];
    this.up = new Gauge({
      name: "portable_lb_bgp_session_up",
      help: "1 while the BGP session to the peer is established",
      labelNames: ["peer"],
      registers,
    });
    this.bfdUp = new Gauge({
      name: "portable_lb_bfd_session_up",
      help: "1 while the BFD session to the peer is Up (absent for a peer without BFD)",
      labelNames: ["peer"],
      registers,
    });
    this.vipsEnabled = new Gauge({
      name: "portable_lb_bgp_vips_enabled",
      help: "1 while BIRD exports the VIPs at all; 0 while the speaker's watchdog holds them back (the announcement lease expired or was revoked)",
      registers,
    });
    this.changes = new Counter({
      name: "portable_lb_bgp_session_changes_total",
      help: "BGP session state changes (up or down)",
      labelNames: ["peer"],
      registers,
    });
    this.lastChange = new Gauge({
      name: "portable_lb_bgp_session_last_change_timestamp_seconds",
      help: "When the BGP session to the peer last changed state",
      labelNames: ["peer"],
      registers,
    });
    this.downFor = new Gauge({
      name: "portable_lb_bgp_session_down_seconds",
      help: "How long the BGP session to the peer has not been established (0 while it is)",
      labelNames: ["peer"],
      registers,
    });
  }

  /**
   * One look at the sessions, through BIRD's kept control connection (what the timer runs, and what a caller
   * that decides on the state calls on its own tick); BIRD not answering counts as all down.
   */
  async poll(): Promise<SpeakerState> {
    let state: SpeakerState;
    try {
      const [protocols = "", bfd = ""] = await this.o.bird.runAll([
        "show protocols all",
        "show bfd sessions",
      ]);
      state = {
        reflectors: reflectorSessions(this.o.reflectors, parseProtocols(protocols), parseBfdSessions(bfd)),
        vipsEnabled: protocolUp(protocols, "vips") ?? false,
      };
    } catch (err) {
      state = {
        reflectors: this.o.reflectors.map((peer) => ({ peer, established: false, info: String(err) })),
      };
    }
    const answered = state.vipsEnabled !== undefined;
    if (answered) this.vipsEnabled.set(state.vipsEnabled ? 1 : 0);
    for (const s of state.reflectors) {
      const { peer } = s;
      const before = this.last.get(peer);
      // Until BIRD first answers (it starts on the controller's first config), there is no session to report on.
      if (!answered && before === undefined) continue;
      this.up.set({ peer }, s.established ? 1 : 0);
      if (s.bfd) this.bfdUp.set({ peer }, s.bfd.state === "Up" ? 1 : 0);
      if (before !== undefined && before !== s.established) {
        this.changes.inc({ peer });
        this.lastChange.set({ peer }, Date.now() / 1000);
        if (before) this.o.onDrop(peer, s.info);
      }
      this.last.set(peer, s.established);
      this.checkDown(s);
    }
    return state;
  }

  private checkDown(s: ReflectorSession): void {
    const { peer } = s;
    const now = Date.now();
    if (s.established) {
      this.downSince.delete(peer);
      this.lastError.delete(peer);
      this.downFor.set({ peer }, 0);
      return;
    }
    // The peer's NOTIFICATION ("Received: Bad peer AS") says why; the socket errors that follow
    // while the peer holds off our retries ("Connection closed") do not, so they never replace it.
    const kept = this.lastError.get(peer);
    const seen = s.lastError ?? (s.info.includes(":") ? s.info : undefined);
    if (seen && !/Received:|Bad peer AS/.test(kept ?? "")) this.lastError.set(peer, seen);
    const since = this.downSince.get(peer) ?? now;
    this.downSince.set(peer, since);
    this.downFor.set({ peer }, (now - since) / 1000);
    const after = this.o.problemAfterMs ?? 10_000;
    const error = this.lastError.get(peer);
    // Reported once BIRD has said what failed, or, when it says nothing (no answer), a while later.
    if (now - since >= (error ? after : 2 * after)) this.o.onProblem(peer, sessionProblem(error ?? s.info));
  }

  start(): void {
    const tick = () => {
      this.timer = setTimeout(() => void this.poll().finally(tick), this.o.intervalMs ?? 2_000);
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
