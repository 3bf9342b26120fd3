// Watches the speaker's BGP sessions through BIRD's control socket (`birdc show protocols`, BIRD
// has no push interface): session state and last change as metrics, and callbacks when an
// established session drops or a session cannot be established (a wrong AS number or password, an
// unreachable reflector), which the controller turns into Warning Events on its Pod. BIRD itself
// keeps retrying, backing off per `error wait time`; nothing here touches the data plane.
import { Counter, Gauge, type Registry } from "prom-client";
import { run } from "../dataplane/exec.ts";

export interface SessionState {
  name: string;
  established: boolean;
  /** Its last state change as BIRD prints it, e.g. "18:08:12.100"; absent when BIRD did not answer. */
  since?: string;
  /** BIRD's info column, e.g. "Established" or "Active  Socket: Connection refused". */
  info: string;
  /** The "Last error:" of `show protocols all`, which BIRD keeps until the session is up again. */
  lastError?: string;
}

/** The BGP sessions of `birdc show protocols all`: each header row, and its "Last error:" line. */
export function parseProtocols(text: string): SessionState[] {
  const sessions: SessionState[] = [];
  let current: SessionState | undefined;
  for (const line of text.split("\n")) {
    const m = /^(\S+)\s+(\S+)\s+\S+\s+\S+\s+(\S+)\s*(.*)$/.exec(line);
    if (m && !line.startsWith(" ")) {
      const info = m[4]!.trim();
      current =
        m[2] === "BGP"
          ? { name: m[1]!, established: info.startsWith("Established"), since: m[3]!, info }
          : undefined;
      if (current) sessions.push(current);
      continue;
    }
    const error = /^\s+Last error:\s+(.*)$/.exec(line);
    if (error && current) current.lastError = error[1]!.trim();
  }
  return sessions;
}

export interface SessionMonitorOptions {
  socket: string;
  /** Session name → the peer it talks to (reflector_1 → the first route reflector). */
  peerOf: (session: string) => string;
  registry: Registry;
  onDrop: (peer: string, info: string) => void;
  /** A session not established for `problemAfterMs`: what is wrong, as far as BIRD tells. */
  onProblem: (peer: string, problem: string) => void;
  birdc?: [string, ...string[]];
  intervalMs?: number;
  /** Default 10 s: a first connect, or a reconnect after BIRD's error wait, takes a few seconds. */
  problemAfterMs?: number;
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
  private readonly changes: Counter;
  private readonly lastChange: Gauge;
  private readonly downFor: Gauge;
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

  /** One look at the sessions (also what the timer runs); BIRD not answering counts as all down. */
  async poll(): Promise<SessionState[]> {
    let sessions: SessionState[];
    try {
      sessions = parseProtocols(
        await run(
          [...(this.o.birdc ?? ["birdc"]), "-s", this.o.socket, "show", "protocols", "all"],
          "",
          5_000,
        ),
      );
    } catch (err) {
      sessions = [...this.last.keys()].map((name) => ({ name, established: false, info: String(err) }));
    }
    for (const s of sessions) {
      const peer = this.o.peerOf(s.name);
      const before = this.last.get(s.name);
      this.up.set({ peer }, s.established ? 1 : 0);
      if (before !== undefined && before !== s.established) {
        this.changes.inc({ peer });
        this.lastChange.set({ peer }, Date.now() / 1000);
        if (before) this.o.onDrop(peer, s.info);
      }
      this.last.set(s.name, s.established);
      this.checkDown(s, peer);
    }
    return sessions;
  }

  private checkDown(s: SessionState, peer: string): void {
    const now = Date.now();
    if (s.established) {
      this.downSince.delete(s.name);
      this.lastError.delete(s.name);
      this.downFor.set({ peer }, 0);
      return;
    }
    // The peer's NOTIFICATION ("Received: Bad peer AS") says why; the socket errors that follow
    // while the peer holds off our retries ("Connection closed") do not, so they never replace it.
    const kept = this.lastError.get(s.name);
    const seen = s.lastError ?? (s.info.includes(":") ? s.info : undefined);
    if (seen && !/Received:|Bad peer AS/.test(kept ?? "")) this.lastError.set(s.name, seen);
    const since = this.downSince.get(s.name) ?? now;
    this.downSince.set(s.name, since);
    this.downFor.set({ peer }, (now - since) / 1000);
    const after = this.o.problemAfterMs ?? 10_000;
    const error = this.lastError.get(s.name);
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
