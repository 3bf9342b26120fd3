// BFD session states as the daemons report them, for tests and benchmarks that check fast failure
// detection is actually running (BGP sessions come up without it; only BFD catches a hung peer).
import { parseBfdSessions } from "../../lb-image/src/bgp/birdOutput.ts";

export interface BfdSession {
  peer: string;
  /** "Up", "Down", "Init", "AdminDown" (BIRD's words; FRR's lower-case ones are capitalized). */
  state: string;
}

/** BIRD's `show bfd sessions`, through the controller's own parser. */
export function parseBirdBfdSessions(text: string): BfdSession[] {
  return parseBfdSessions(text).map((s) => ({ peer: s.address, state: s.state }));
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
