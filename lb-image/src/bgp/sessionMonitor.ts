// Watches the speaker's BGP sessions through BIRD's control socket (`birdc show protocols`, BIRD
// has no push interface): session state and last change as metrics, and a callback when an
// established session drops, which the controller turns into a Warning Event on its Pod.
import { Counter, Gauge, type Registry } from "prom-client";
import { run } from "../dataplane/exec.ts";

export interface SessionState {
  name: string;
  established: boolean;
  /** BIRD's info column, e.g. "Established" or "Active  Socket: Connection refused". */
  info: string;
}

/** The BGP rows of `birdc show protocols`. */
export function parseProtocols(text: string): SessionState[] {
  return text.split("\n").flatMap((line) => {
    const m = /^(\S+)\s+BGP\s+\S+\s+\S+\s+\S+\s*(.*)$/.exec(line);
    if (!m) return [];
    const info = m[2]!.trim();
    return [{ name: m[1]!, established: info.startsWith("Established"), info }];
  });
}

export interface SessionMonitorOptions {
  socket: string;
  /** Session name → the peer it talks to (reflector_1 → the first route reflector). */
  peerOf: (session: string) => string;
  registry: Registry;
  onDrop: (peer: string, info: string) => void;
  birdc?: [string, ...string[]];
  intervalMs?: number;
}

export class SessionMonitor {
  private readonly o: SessionMonitorOptions;
  private readonly up: Gauge;
  private readonly changes: Counter;
  private readonly lastChange: Gauge;
  private readonly last = new Map<string, boolean>();
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
  }

  /** One look at the sessions (also what the timer runs); BIRD not answering counts as all down. */
  async poll(): Promise<SessionState[]> {
    let sessions: SessionState[];
    try {
      sessions = parseProtocols(
        await run([...(this.o.birdc ?? ["birdc"]), "-s", this.o.socket, "show", "protocols"], "", 5_000),
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
    }
    return sessions;
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
