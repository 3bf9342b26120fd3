// Parsers of BIRD 2.0.12's answers on its control socket (`birdc show protocols [all]`, `show bfd
// sessions`), and the per-reflector view the controller decides on. BIRD prints tables for people;
// the speaker config's `timeformat protocol` makes its Since columns dates with a zone.

/** A row of `show protocols`: every protocol, BGP or not. */
interface ProtocolRow {
  name: string;
  proto: string;
  /** BIRD's protocol state: up, down, start, stop. */
  state: string;
  since: string;
  info: string;
}

export interface SessionState {
  name: string;
  established: boolean;
  /** Its last state change as BIRD prints it, e.g. "2026-05-04T18:08:12.100+0000"; absent when BIRD did not answer. */
  since?: string;
  /** BIRD's info column, e.g. "Established" or "Active  Socket: Connection refused". */
  info: string;
  /** The "Last error:" of `show protocols all`, which BIRD keeps until the session is up again. */
  lastError?: string;
  /** The peer's address ("Neighbor address:" of `show protocols all`). */
  neighbor?: string;
  /** Routes the session exports now (the "Routes:" line `show protocols all` gives while it is up). */
  exported?: number;
}

export type BfdState = "Up" | "Down" | "Init" | "AdminDown";

export interface BfdSession {
  address: string;
  state: BfdState;
  since: string;
}

/** What the controller needs of one route reflector to decide whether to export to it. */
export interface ReflectorSession {
  /** The reflector's address. */
  peer: string;
  /** BIRD's protocol for it (reflector_<n>); absent when BIRD has none (not running, or another config). */
  session?: string;
  /** The BGP session is Established. */
  established: boolean;
  /** When the BGP session last changed state (ms since the epoch), when BIRD's date format allows. */
  since?: number;
  /** The BFD session to the reflector; absent when BIRD runs none to it (no `bfd on`). */
  bfd?: { state: BfdState; since?: number };
  /** Routes exported to the reflector now (established sessions). */
  exported?: number;
  info: string;
  lastError?: string;
}

const ROW = /^(\S+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s*(.*)$/;

function protocolRows(text: string, onDetail: (row: ProtocolRow, line: string) => void = () => undefined) {
  const rows: ProtocolRow[] = [];
  let current: ProtocolRow | undefined;
  for (const line of text.split("\n")) {
    const m = line.startsWith(" ") ? null : ROW.exec(line);
    if (m) {
      current = { name: m[1]!, proto: m[2]!, state: m[3]!, since: m[4]!, info: m[5]!.trim() };
      if (current.name !== "Name") rows.push(current);
    } else if (current) onDetail(current, line);
  }
  return rows;
}

/** The BGP sessions of `birdc show protocols [all]`, with the details `all` adds. */
export function parseProtocols(text: string): SessionState[] {
  const details = new Map<ProtocolRow, Partial<SessionState>>();
  const rows = protocolRows(text, (row, line) => {
    const d = details.get(row) ?? {};
    details.set(row, d);
    const [, key, value] = /^\s+(Last error|Neighbor address|Routes):\s+(.*)$/.exec(line) ?? [];
    if (key === "Last error") d.lastError = value!.trim();
    if (key === "Neighbor address") d.neighbor = value!.trim();
    const exported = key === "Routes" ? /(\d+) exported/.exec(value!) : null;
    if (exported) d.exported = Number(exported[1]);
  });
  return rows
    .filter((r) => r.proto === "BGP")
    .map((r) => ({
      name: r.name,
      established: r.info.startsWith("Established"),
      since: r.since,
      info: r.info,
      ...details.get(r),
    }));
}

/** Whether the protocol `name` is up in `birdc show protocols [all]`; undefined when BIRD has none. */
export function protocolUp(text: string, name: string): boolean | undefined {
  const row = protocolRows(text).find((r) => r.name === name);
  return row && row.state === "up";
}

/** "Routes: 0 imported, 2 exported, 0 preferred" → 2, per established session of `show protocols all`. */
export function exportedPerSession(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of parseProtocols(text)) if (s.exported !== undefined) out.set(s.name, s.exported);
  return out;
}

/** The sessions of `birdc show bfd sessions` (every BFD protocol's table). */
export function parseBfdSessions(text: string): BfdSession[] {
  const sessions: BfdSession[] = [];
  for (const line of text.split("\n")) {
    const m = /^(\S+)\s+\S+\s+(Up|Down|Init|AdminDown)\s+(\S+)/.exec(line);
    if (m) sessions.push({ address: m[1]!, state: m[2] as BfdState, since: m[3]! });
  }
  return sessions;
}

/** BIRD's Since column in ms since the epoch; undefined for a time of day without a date. */
function sinceMs(since: string | undefined): number | undefined {
  const ms = since === undefined ? NaN : Date.parse(since);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Each of `reflectors` with its BGP session (matched by neighbor address) and BFD session. */
export function reflectorSessions(
  reflectors: readonly string[],
  protocols: readonly SessionState[],
  bfd: readonly BfdSession[],
): ReflectorSession[] {
  return reflectors.map((peer) => {
    const s = protocols.find((p) => p.neighbor === peer);
    // A peer has one BFD session per BFD protocol; one Up is enough (the speaker runs one).
    const b = bfd.find((x) => x.address === peer && x.state === "Up") ?? bfd.find((x) => x.address === peer);
    const since = sinceMs(s?.since);
    const bfdSince = sinceMs(b?.since);
    return {
      peer,
      ...(s && { session: s.name }),
      established: s?.established ?? false,
      ...(since !== undefined && { since }),
      ...(b && { bfd: { state: b.state, ...(bfdSince !== undefined && { since: bfdSince }) } }),
      ...(s?.exported !== undefined && { exported: s.exported }),
      info: s?.info ?? "no BGP session to this reflector in BIRD's config",
      ...(s?.lastError !== undefined && { lastError: s.lastError }),
    };
  });
}
