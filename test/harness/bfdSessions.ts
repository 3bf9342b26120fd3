// BFD session states as the daemons report them, for tests and benchmarks that check fast failure
// detection is actually running (BGP sessions come up without it; only BFD catches a hung peer).

export interface BfdSession {
  peer: string;
  /** "Up", "Down", "Init", "AdminDown" (BIRD's words; FRR's lower-case ones are capitalized). */
  state: string;
}

/** BIRD's `show bfd sessions`: one row per session, "address interface state since …". */
export function parseBirdBfdSessions(text: string): BfdSession[] {
  return text
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f[0] ?? ""))
    .map((f) => ({ peer: f[0]!, state: f[2] ?? "" }));
}

/** FRR's `show bfd peers json`: an array of peers with their status ("up", "down", …). */
export function parseFrrBfdPeers(json: string): BfdSession[] {
  const peers = JSON.parse(json || "[]") as { peer?: string; status?: string }[];
  return peers.map((p) => ({
    peer: p.peer ?? "",
    state: (p.status ?? "").replace(/^./, (c) => c.toUpperCase()),
  }));
}

/** The peers whose session is Up, sorted. */
export const upPeers = (sessions: BfdSession[]): string[] =>
  sessions
    .filter((s) => s.state === "Up")
    .map((s) => s.peer)
    .sort();
