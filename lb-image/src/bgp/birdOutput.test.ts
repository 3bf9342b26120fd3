import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BirdControl, birdNotRunning } from "./birdControl.ts";
import { birdcLine } from "./birdSocket.ts";
import {
  exportedPerSession,
  parseBfdSessions,
  parseProtocols,
  protocolUp,
  reflectorSessions,
} from "./birdOutput.ts";

// BIRD 2.0.12's answers, as it printed them to the speaker config's `timeformat protocol` (trimmed).
const PROTOCOLS_ALL = [
  "Name       Proto      Table      State  Since         Info",
  "device1    Device     ---        up     2026-11-23T23:22:59.702+0000  ",
  "",
  "vips       Static     master4    down   2026-11-23T23:22:59.702+0000  ",
  "  Channel ipv4",
  "    State:          DOWN",
  "",
  "bfd1       BFD        ---        up     2026-11-23T23:22:59.702+0000  ",
  "",
  "reflector_1 BGP        ---        up     2026-11-23T23:23:20.087+0000  Established   ",
  "  BGP state:          Established",
  "    Neighbor address: 10.99.0.2",
  "    Neighbor AS:      64512",
  "  Channel ipv4",
  "    State:          UP",
  "    Output filter:  (unnamed)",
  "    Routes:         0 imported, 2 exported, 0 preferred",
  "    Route change stats:     received   rejected   filtered    ignored   accepted",
  "      Export updates:              2          0          1        ---          1",
  "",
  "reflector_2 BGP        ---        start  2026-11-23T23:24:12.281+0000  Idle          Error: BFD session down",
  "  BGP state:          Idle",
  "    Neighbor address: 10.98.0.3",
  "    Error wait:       46.454/60",
  "    Last error:       Error: BFD session down",
  "  Channel ipv4",
  "    State:          DOWN",
  "",
].join("\n");

const BFD_SESSIONS = [
  "bfd1:",
  "IP address                Interface  State      Since         Interval  Timeout",
  "10.98.0.3                 ---        Down       2026-11-23T23:24:12.281+0000    1.000    0.000",
  "10.99.0.2                 ---        Up         2026-11-23T23:23:20.027+0000    0.100    0.500",
  "",
].join("\n");

describe("parseProtocols", () => {
  it("reads each BGP session's state, last change, neighbor, exports and last error from show protocols all", () => {
    expect(parseProtocols(PROTOCOLS_ALL)).toEqual([
      {
        name: "reflector_1",
        established: true,
        since: "2026-11-23T23:23:20.087+0000",
        info: "Established",
        neighbor: "10.99.0.2",
        exported: 2,
      },
      {
        name: "reflector_2",
        established: false,
        since: "2026-11-23T23:24:12.281+0000",
        info: "Idle          Error: BFD session down",
        neighbor: "10.98.0.3",
        lastError: "Error: BFD session down",
      },
    ]);
  });

  it("reads BIRD's default time of day and the short listing too", () => {
    const text = [
      "BIRD 2.0.12 ready.",
      "Name       Proto      Table      State  Since         Info",
      "reflector_1 BGP        ---        start  18:08:11.019  Active        Socket: Connection refused",
    ].join("\n");
    expect(parseProtocols(text)).toEqual([
      {
        name: "reflector_1",
        established: false,
        since: "18:08:11.019",
        info: "Active        Socket: Connection refused",
      },
    ]);
  });
});

describe("exportedPerSession and protocolUp", () => {
  it("gives the exported route count of each established session, and whether a protocol is up", () => {
    expect([...exportedPerSession(PROTOCOLS_ALL)]).toEqual([["reflector_1", 2]]);
    expect(protocolUp(PROTOCOLS_ALL, "vips")).toBe(false);
    expect(protocolUp(PROTOCOLS_ALL, "bfd1")).toBe(true);
    expect(protocolUp(PROTOCOLS_ALL, "static2")).toBeUndefined();
  });
});

describe("parseBfdSessions", () => {
  it("reads each BFD session's address, state and last change", () => {
    expect(parseBfdSessions(BFD_SESSIONS)).toEqual([
      { address: "10.98.0.3", state: "Down", since: "2026-11-23T23:24:12.281+0000" },
      { address: "10.99.0.2", state: "Up", since: "2026-11-23T23:23:20.027+0000" },
    ]);
    expect(
      parseBfdSessions(
        "bfd1:\nIP address                Interface  State      Since         Interval  Timeout\n",
      ),
    ).toEqual([]);
  });
});

describe("reflectorSessions", () => {
  it("joins each reflector's BGP and BFD sessions by address, with since as ms since the epoch", () => {
    const sessions = reflectorSessions(
      ["10.99.0.2", "10.98.0.3", "10.97.0.4"],
      parseProtocols(PROTOCOLS_ALL),
      parseBfdSessions(BFD_SESSIONS),
    );
    expect(sessions).toEqual([
      {
        peer: "10.99.0.2",
        session: "reflector_1",
        established: true,
        since: Date.UTC(2026, 10, 23, 23, 23, 20, 87),
        bfd: { state: "Up", since: Date.UTC(2026, 10, 23, 23, 23, 20, 27) },
        exported: 2,
        info: "Established",
      },
      {
        peer: "10.98.0.3",
        session: "reflector_2",
        established: false,
        since: Date.UTC(2026, 10, 23, 23, 24, 12, 281),
        bfd: { state: "Down", since: Date.UTC(2026, 10, 23, 23, 24, 12, 281) },
        info: "Idle          Error: BFD session down",
        lastError: "Error: BFD session down",
      },
      { peer: "10.97.0.4", established: false, info: "no BGP session to this reflector in BIRD's config" },
    ]);
  });

  it("leaves bfd out for a peer BIRD runs no BFD session to, and since out for a time without a date", () => {
    const [s] = reflectorSessions(
      ["10.0.0.5"],
      parseProtocols(
        "reflector_1 BGP        ---        up     18:08:12.100  Established\n    Neighbor address: 10.0.0.5\n",
      ),
      [],
    );
    expect(s).toEqual({ peer: "10.0.0.5", session: "reflector_1", established: true, info: "Established" });
  });
});

describe("BIRD's control socket, read as birdc prints it", () => {
  it("drops the codes, keeps continuations, leaves out the bare OK", () => {
    // Lines as BIRD 2.0.12 sends them for `show protocols` then `show status`.
    const raw = [
      "2002-Name       Proto      Table      State  Since         Info",
      "1002-device1    Device     ---        up     23:24:50.858  ",
      " vips       Static     master4    up     23:24:50.858  ",
      "1006-",
      "0000 ",
      "0013 Daemon is up and running",
      "9001 syntax error, unexpected CF_SYM_UNDEFINED",
    ];
    expect(raw.map(birdcLine)).toEqual([
      "Name       Proto      Table      State  Since         Info",
      "device1    Device     ---        up     23:24:50.858  ",
      "vips       Static     master4    up     23:24:50.858  ",
      "",
      undefined,
      "Daemon is up and running",
      "syntax error, unexpected CF_SYM_UNDEFINED",
    ]);
  });

  it("fails as birdc does when BIRD is not running, so callers tell that apart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "birdsock-"));
    try {
      const err = await new BirdControl(join(dir, "bird.ctl"))
        .runAll(["show protocols"])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toMatch(/Unable to connect .*bird\.ctl.*No such file/);
      expect(birdNotRunning(err)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
