// Real IPVS, in the QEMU guest (this machine's kernel has none): virtual services made with literal
// ipvsadm commands in NAT mode balance HTTP between busybox backends as each scheduler promises,
// and `ipvsadm -Sn` prints what test/fixtures/ipvsadm-Sn.txt holds (the parser's test input).
// One boot runs every scenario, each printing its own section, to keep emulated boots to one.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { guestSection } from "../harness/qemu/guestOutput.ts";
import { GUEST_PATHS, runInIpvsGuest, type IpvsGuestResult } from "../harness/qemu/ipvsGuest.ts";
import { backendPage, guestTopology } from "../harness/qemu/guestTopology.ts";

const FIXTURE = join(__dirname, "../fixtures/ipvsadm-Sn.txt");
// Set to rewrite the fixture from the guest (after an ipvsadm or kernel bump), then review the diff.
const UPDATE_FIXTURE = process.env.PORTABLE_LB_UPDATE_FIXTURES === "1";
const REQUESTS = 30;
// Distinct source ports for mh: with 3 backends, all 12 hashing to one is a 1-in-177,000 chance.
const MH_PORTS = 12;

const topo = guestTopology({ backends: 3 });
const { vip, backendIps } = topo;
const [b1, b2, b3] = backendIps as [string, string, string];
const { ip, ipvsadm } = GUEST_PATHS;
const lb = `${ip} netns exec lb`;
const client = `${ip} netns exec client`;

/** A scheduler's service on VIP:port in NAT (masq) mode over `servers` ([address, weight]). */
function service(port: number, scheduler: string, servers: [string, number][], flags = ""): string {
  return [
    `${lb} ${ipvsadm} -A -t ${vip}:${port} -s ${scheduler}${flags ? ` -b ${flags}` : ""}`,
    ...servers.map(([addr, w]) => `${lb} ${ipvsadm} -a -t ${vip}:${port} -r ${addr}:80 -m -w ${w}`),
  ].join("\n");
}

/** `count` sequential HTTP requests to VIP:port from the client; each prints its page (or a failure). */
function requests(port: number, count: number): string {
  return `for i in $(seq ${count}); do ${client} timeout 5 wget -q -O - http://${vip}:${port}/ || echo "request failed"; done`;
}

// With the client's ephemeral port range pinned to one port, every connection has the same source
// address and port. wget may close before the server does; with no TIME_WAIT buckets in the client's
// namespace its socket closes outright, so the port is free again for the next request at once.
const pinSourcePort = (port: number): string =>
  `${client} sysctl -q -w net.ipv4.tcp_max_tw_buckets=0 net.ipv4.ip_local_port_range="${port} ${port}"`;
const unpinSourcePort = `${client} sysctl -q -w net.ipv4.ip_local_port_range="32768 60999"`;

const section = (name: string): string => `echo "=== ${name}"`;

const script = [
  // Any failing setup step (ipvsadm, topology) ends the script, and beforeAll shows its output.
  "set -eu",
  topo.script,
  service(80, "rr", [
    [b1, 1],
    [b2, 1],
    [b3, 1],
  ]),
  service(81, "lc", [
    [b1, 1],
    [b2, 1],
    [b3, 1],
  ]),
  service(
    82,
    "mh",
    [
      [b1, 1],
      [b2, 1],
      [b3, 1],
    ],
    "mh-port",
  ),
  service(83, "wrr", [
    [b1, 2],
    [b2, 1],
    [b3, 0],
  ]),
  // As the engine writes a Service with sessionAffinity ClientIP: mh over the source address alone.
  service(
    84,
    "mh",
    [
      [b1, 1],
      [b2, 1],
      [b3, 1],
    ],
    "mh-fallback",
  ),
  section("rr"),
  requests(80, REQUESTS),
  section("rr-pinned"),
  pinSourcePort(40001),
  requests(80, 6),
  unpinSourcePort,
  section("lc"),
  requests(81, REQUESTS),
  section("mh-pinned"),
  pinSourcePort(40001),
  requests(82, 10),
  section("mh-ports"),
  ...Array.from({ length: MH_PORTS }, (_, i) => 40002 + i).flatMap((p) => [
    pinSourcePort(p),
    requests(82, 1),
  ]),
  section("mh-affinity"),
  ...Array.from({ length: MH_PORTS }, (_, i) => 40002 + i).flatMap((p) => [
    pinSourcePort(p),
    requests(84, 1),
  ]),
  unpinSourcePort,
  section("wrr"),
  requests(83, 12),
  section("list"),
  `${lb} ${ipvsadm} -Ln`,
  // The fixture's services live in a namespace of their own (IPVS tables are per namespace).
  `${ip} netns add fixture`,
  // IPVS refuses a NAT server address that is not unicast by the namespace's routes: with lo down
  // nothing is routable there.
  `${ip} -n fixture link set lo up`,
  `F="${ip} netns exec fixture ${ipvsadm}"`,
  `$F -A -t ${vip}:80 -s rr`,
  ...[b1, b2, b3].map((addr) => `$F -a -t ${vip}:80 -r ${addr}:80 -m`),
  "$F -A -t 10.1.1.11:80 -s wrr",
  `$F -a -t 10.1.1.11:80 -r ${b1}:8080 -m -w 3`,
  `$F -a -t 10.1.1.11:80 -r ${b2}:8080 -m -w 1`,
  `$F -a -t 10.1.1.11:80 -r ${b3}:8080 -m -w 0`,
  "$F -A -t 10.1.1.12:443 -s lc",
  `$F -a -t 10.1.1.12:443 -r ${b1}:443 -m -w 1`,
  `$F -a -t 10.1.1.12:443 -r ${b2}:443 -m -w 0`,
  "$F -A -t 10.1.1.13:80 -s mh -b mh-fallback,mh-port",
  ...[b1, b2, b3].map((addr, i) => `$F -a -t 10.1.1.13:80 -r ${addr}:80 -m -w ${i}`),
  "$F -A -u 10.1.1.14:53 -s rr",
  `$F -a -u 10.1.1.14:53 -r ${b1}:53 -m -w 1`,
  section("save"),
  "$F -Sn",
  // The saved form is also what `ipvsadm -R` takes, as the controller feeds it.
  `${ip} netns add restored`,
  `${ip} -n restored link set lo up`,
  `${ip} netns exec restored ${ipvsadm} -R <ipvsadm-Sn.txt`,
  section("restored"),
  `${ip} netns exec restored ${ipvsadm} -Sn`,
  section("end"),
].join("\n");

function sectionOf(result: IpvsGuestResult, name: string): string[] {
  return guestSection(result.output, name);
}

/** Which backend served each response, by the address its page names. */
function servedBy(result: IpvsGuestResult, name: string): string[] {
  return sectionOf(result, name).map((line) => backendIps.find((addr) => line === backendPage(addr)) ?? line);
}

const counts = (answers: string[]): Map<string, number> =>
  answers.reduce((m, a) => m.set(a, (m.get(a) ?? 0) + 1), new Map<string, number>());

describe("IPVS in the QEMU guest (NAT mode, literal ipvsadm)", () => {
  let result: IpvsGuestResult;

  beforeAll(async () => {
    // Under TCG with other builds on both CPUs a boot plus ~110 requests can take a few minutes.
    const fixture = existsSync(FIXTURE) ? readFileSync(FIXTURE, "utf8") : "";
    result = await runInIpvsGuest({ script, files: { "ipvsadm-Sn.txt": fixture }, timeoutMs: 240_000 });
    if (result.exitCode !== 0) throw new Error(`guest script exited ${result.exitCode}:\n${result.output}`);
  }, 250_000);

  it("rr sends requests to every backend in turn", () => {
    const answers = servedBy(result, "rr");
    expect(answers).toHaveLength(REQUESTS);
    expect([...counts(answers).entries()].sort()).toEqual([
      [b1, REQUESTS / 3],
      [b2, REQUESTS / 3],
      [b3, REQUESTS / 3],
    ]);
  });

  it("rr reschedules a reused source port (so mh's stickiness below is the scheduler's doing)", () => {
    expect(counts(servedBy(result, "rr-pinned")).size).toBeGreaterThan(1);
  });

  it("lc spreads sequential requests over every backend", () => {
    const answers = servedBy(result, "lc");
    expect(answers).toHaveLength(REQUESTS);
    expect(new Set(answers)).toEqual(new Set(backendIps));
  });

  it("mh with mh-port maps one source address and port to one backend, and hashes the port", () => {
    const pinned = servedBy(result, "mh-pinned");
    expect(pinned).toHaveLength(10);
    expect(backendIps).toContain(pinned[0]);
    expect(new Set(pinned).size).toBe(1);
    const byPort = servedBy(result, "mh-ports");
    expect(byPort).toHaveLength(MH_PORTS);
    expect(byPort.every((a) => backendIps.includes(a))).toBe(true);
    expect(new Set(byPort).size).toBeGreaterThan(1);
  });

  it("mh without mh-port (client affinity) maps one source address to one backend, whatever its port", () => {
    const byPort = servedBy(result, "mh-affinity");
    expect(byPort).toHaveLength(MH_PORTS);
    expect(backendIps).toContain(byPort[0]);
    // The same ports spread under mh-port above.
    expect(new Set(byPort).size).toBe(1);
  });

  it("wrr follows the weights and never picks a weight-0 server", () => {
    expect([...counts(servedBy(result, "wrr")).entries()].sort()).toEqual([
      [b1, 8],
      [b2, 4],
    ]);
  });

  it("ipvsadm -Ln lists each service with its masqueraded servers", () => {
    const list = sectionOf(result, "list").join("\n");
    for (const [port, sched] of [
      [80, "rr"],
      [81, "lc"],
      [82, "mh (mh-port)"],
      [83, "wrr"],
      [84, "mh (mh-fallback)"],
    ] as const) {
      expect(list).toContain(`TCP  ${vip}:${port} ${sched}`);
    }
    for (const addr of backendIps) expect(list).toMatch(new RegExp(`-> ${addr}:80 +Masq +[012] `));
  });

  it("ipvsadm -Sn prints exactly the committed fixture", () => {
    const saved = `${sectionOf(result, "save").join("\n")}\n`;
    expect(saved).toMatch(/^-A -t 10\.1\.1\.13:80 -s mh -b mh-fallback,mh-port$/m);
    if (UPDATE_FIXTURE) writeFileSync(FIXTURE, saved);
    expect(saved).toBe(readFileSync(FIXTURE, "utf8"));
  });

  it("ipvsadm -R restores the fixture to the same rules", () => {
    expect(`${sectionOf(result, "restored").join("\n")}\n`).toBe(readFileSync(FIXTURE, "utf8"));
  });
});

describe("the IPVS guest harness's failure paths", () => {
  it("kills a run past its timeout and leaves no temp files", async () => {
    // Its temp files in a folder of its own: other tests' guests come and go in /tmp meanwhile.
    const own = mkdtempSync(join(tmpdir(), "plb-guest-timeout-"));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = own;
    try {
      const started = Date.now();
      await expect(runInIpvsGuest({ script: "sleep 600", timeoutMs: 8_000 })).rejects.toThrow(
        /did not finish within 8000 ms/,
      );
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(readdirSync(own)).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
      rmSync(own, { recursive: true, force: true });
    }
  });

  it("says to run the bootstrap when the image is missing", async () => {
    const saved = process.env.PORTABLE_LB_CACHE;
    const empty = mkdtempSync(join(tmpdir(), "plb-no-cache-"));
    process.env.PORTABLE_LB_CACHE = empty;
    try {
      await expect(runInIpvsGuest({ script: "true" })).rejects.toThrow(
        /IPVS guest image is missing .*run scripts\/bootstrap\.sh/,
      );
    } finally {
      if (saved === undefined) delete process.env.PORTABLE_LB_CACHE;
      else process.env.PORTABLE_LB_CACHE = saved;
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
