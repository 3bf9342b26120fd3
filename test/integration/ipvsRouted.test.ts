// The IPVS engine (our built code, run by Node inside the QEMU guest) against real IPVS in a network
// where backends reply by their own route (routedTopology.ts), as on a real cluster:
// - NAT mode works because the engine masquerades (and fails, as a control, once its table is gone;
//   a verification then puts it back);
// - tunnel mode (DSR): backends decapsulate and answer the client from the VIP themselves;
// - two LBs with the same servers pick the same backend for each of 200 flows (source ports),
//   although one of them had a server removed and added back (a third, whose history was made with
//   literal ipvsadm commands, lists its servers in another order: the case the engine's re-adds
//   prevent; measured, it moves 1 flow of the 200);
// - a connection established before a server was added (and its dest deleted and re-added in the
//   engine's batch) keeps its backend;
// - in auto mode the engine is chosen by what the LB's namespace offers (net.ipv4.vs.conntrack).
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import type { VirtualService } from "../../lb-image/src/dataplane/model.ts";
import { backendPage } from "../harness/qemu/guestTopology.ts";
import { GUEST_NODE, GUEST_NODE_MEMORY_MIB, guestNodeEntries } from "../harness/qemu/guestNode.ts";
import { guestSection } from "../harness/qemu/guestOutput.ts";
import { GUEST_PATHS, runInIpvsGuest, type IpvsGuestResult } from "../harness/qemu/ipvsGuest.ts";
import { routedTopology } from "../harness/qemu/routedTopology.ts";
import { repoRoot } from "../harness/repoRoot.ts";

const topo = routedTopology({ backends: 3, lbs: 3 });
const { snatVip, dsrVip, backendIps, lbs } = topo;
const [lb1, lb2, lb3] = lbs.map((l) => l.ns) as [string, string, string];
const [b1] = backendIps as [string, string, string];
const { ip, ipvsadm } = GUEST_PATHS;
// Distinct source ports compared across LBs, each a flow of its own to mh-port: with 3 backends,
// all agreeing by chance where the Maglev tables differ is what the control (lb3) shows.
const FLOW_PORTS = Array.from({ length: 200 }, (_, i) => 41000 + i);

const services = (ips: string[]): VirtualService[] =>
  (["snat", "dsr"] as const).map((forwarding) => ({
    vip: forwarding === "snat" ? snatVip : dsrVip,
    port: topo.port,
    protocol: "tcp",
    scheduler: "mh",
    forwarding,
    backends: ips.map((b) => ({ ip: b, port: topo.port, weight: 1 })),
  }));

// The engine, driven as the controller drives it: a fresh process per step adopts what the kernel
// holds (as a restarted controller does) and applies by diff.
const DRIVER = `
const { IpvsEngine } = require("/opt/plb/dataplane/ipvs/ipvsEngine.js");
const { chooseEngine, ipvsSupport } = require("/opt/plb/dataplane/chooseEngine.js");
const fs = require("node:fs");
const [ns, ...ops] = process.argv.slice(2);
const prefix = ["ip", "netns", "exec", ns];
(async () => {
  const engine = new IpvsEngine(prefix);
  for (const op of ops) {
    let out;
    if (op.startsWith("apply:")) out = await engine.apply(JSON.parse(fs.readFileSync(op.slice(6), "utf8")));
    else if (op === "verify") out = await engine.verify("full");
    else if (op.startsWith("pause:")) {
      // Lets the script change the kernel behind the engine's back: NAME.ready, then NAME.go.
      const name = "/tmp/" + op.slice(6);
      fs.writeFileSync(name + ".ready", "");
      for (let i = 0; !fs.existsSync(name + ".go"); i++) {
        if (i > 600) throw new Error("no " + name + ".go within 60 s");
        await new Promise((r) => setTimeout(r, 100));
      }
      continue;
    }
    else if (op === "choose") {
      const c = chooseEngine("auto", await ipvsSupport(prefix), prefix);
      out = { engine: c.engine.name, reason: c.reason };
    } else throw new Error("unknown op " + op);
    console.log("ENGINE " + JSON.stringify({ ns, op, ...out }));
  }
})().catch((e) => { console.log("ENGINE-FAILED " + ns + " " + e.message); process.exit(3); });
`;

// One GET per source port (argv: VIP, the ports), a few at a time, each answered or failed within
// 5 s: "PORT PAGE" lines in port order. Node binds each port itself (SO_REUSEADDR), so the same
// ports serve the next LB's round.
const FLOWS = `
const net = require("node:net");
const [vip, ...ports] = process.argv.slice(2).map((a, i) => (i === 0 ? a : Number(a)));
const get = (port) => new Promise((done) => {
  let body = "";
  const s = net.connect({ host: vip, port: 80, localPort: port });
  const fail = () => { s.destroy(); done("request failed"); };
  s.setTimeout(5000, fail);
  s.on("error", fail);
  s.on("connect", () => s.write("GET / HTTP/1.0\\r\\n\\r\\n"));
  s.on("data", (d) => (body += d));
  s.on("end", () => done(body.split("\\r\\n\\r\\n").slice(1).join("").trim() || "request failed"));
});
(async () => {
  const pages = new Array(ports.length);
  let next = 0;
  const worker = async () => { while (next < ports.length) { const i = next++; pages[i] = await get(ports[i]); } };
  await Promise.all(Array.from({ length: 8 }, worker));
  ports.forEach((p, i) => console.log(p + " " + pages[i]));
})();
`;

const drive = (ns: string, ...ops: string[]) => `${GUEST_NODE} /test/driver.js ${ns} ${ops.join(" ")}`;
const client = `${ip} netns exec client`;
const get = (vip: string, n: number, secs = 5) =>
  `for i in $(seq ${n}); do ${client} timeout ${secs} wget -q -O - http://${vip}/ || echo "request failed"; done`;
const section = (name: string) => `echo "=== ${name}"`;
// A connection that sends its POST body 6 s after connecting: it answers only if every packet of
// it still reaches the backend that accepted it.
const slowPost = (vip: string, out: string) =>
  `{ printf 'POST /cgi-bin/echo HTTP/1.0\\r\\nContent-Length: 6\\r\\n\\r\\n'; sleep 6; printf 'later\\n'; sleep 2; } | ${client} timeout 20 nc ${vip} 80 >${out} 2>&1 &`;

const script = [
  "set -eu",
  topo.script,
  section("choose-off"),
  drive(lb2, "choose"),
  // What the pod spec does with dataPlane.engine ipvs (the kubelet sets the pod's sysctls).
  ...lbs.map((l) => `${ip} netns exec ${l.ns} sysctl -q -w net.ipv4.vs.conntrack=1`),
  section("choose-on"),
  drive(lb2, "choose"),
  section("apply"),
  // In the background, paused after applying, until the table is gone: then it verifies.
  `${drive(lb1, "apply:/test/all.json", "pause:drift", "verify")} & driver=$!`,
  "i=0; until [ -e /tmp/drift.ready ]; do i=$((i + 1)); [ $i -lt 300 ] || exit 91; sleep 0.2; done",
  section("nat"),
  get(snatVip, 12),
  section("dsr"),
  get(dsrVip, 12),
  section("snat-table"),
  `${ip} netns exec ${lb1} nft list table ip portable_lb_ipvs`,
  // The control: without masquerading, replies from the backends' own addresses reach nothing.
  `${ip} netns exec ${lb1} nft delete table ip portable_lb_ipvs`,
  section("unmasqueraded"),
  get(snatVip, 2, 3),
  section("repair"),
  "touch /tmp/drift.go",
  "wait $driver",
  section("nat-repaired"),
  get(snatVip, 6),
  section("history"),
  // lb2: the same servers, after b1 was removed and added back (restarts between, as in a pod).
  drive(lb2, "apply:/test/all.json"),
  drive(lb2, "apply:/test/without-b1.json"),
  drive(lb2, "apply:/test/all.json"),
  // lb3: the same history in literal ipvsadm commands, one server at a time.
  `L3="${ip} netns exec ${lb3} ${ipvsadm}"`,
  `$L3 -A -t ${dsrVip}:80 -s mh -b mh-fallback,mh-port`,
  ...backendIps.map((b) => `$L3 -a -t ${dsrVip}:80 -r ${b}:80 -i -w 1`),
  `$L3 -d -t ${dsrVip}:80 -r ${b1}:80`,
  `$L3 -a -t ${dsrVip}:80 -r ${b1}:80 -i -w 1`,
  ...lbs.flatMap((l) => [section(`order ${l.ns}`), `${ip} netns exec ${l.ns} cat /proc/net/ip_vs`]),
  `${client} sysctl -q -w net.ipv4.tcp_max_tw_buckets=0`,
  ...lbs.flatMap((l, i) => [
    topo.routeVipsVia(i),
    section(`flows ${l.ns}`),
    `${client} ${GUEST_NODE} /test/flows.js ${dsrVip} ${FLOW_PORTS.join(" ")}`,
  ]),
  topo.routeVipsVia(0),
  // Established connections across a re-add: b1 goes, connections start, b1 comes back (so the
  // engine deletes and re-adds b2 and b3 behind it), then the connections send.
  section("remove-b1"),
  drive(lb1, "apply:/test/without-b1.json"),
  slowPost(dsrVip, "/tmp/slow-dsr"),
  slowPost(snatVip, "/tmp/slow-nat"),
  "sleep 1",
  section("conns-before"),
  `${ip} netns exec ${lb1} ${ipvsadm} -L -n -c`,
  section("readd"),
  drive(lb1, "apply:/test/all.json"),
  section("conns-after"),
  `${ip} netns exec ${lb1} ${ipvsadm} -L -n -c`,
  "wait",
  section("slow-dsr"),
  "cat /tmp/slow-dsr",
  section("slow-nat"),
  "cat /tmp/slow-nat",
  section("end"),
].join("\n");

function sectionOf(result: IpvsGuestResult, name: string): string[] {
  return guestSection(result.output, name);
}
const servedBy = (line: string) => backendIps.find((b) => line.endsWith(backendPage(b))) ?? line;
const engineLines = (result: IpvsGuestResult, name: string) =>
  sectionOf(result, name)
    .filter((l) => l.startsWith("ENGINE "))
    .map((l) => JSON.parse(l.slice("ENGINE ".length)) as Record<string, unknown>);
/** Real servers of the DSR service in /proc/net/ip_vs order (hex address:port). */
const dsrOrder = (result: IpvsGuestResult, ns: string) => {
  const lines = sectionOf(result, `order ${ns}`);
  const at = lines.findIndex((l) => l.startsWith("TCP  0A010114:0050"));
  const servers: string[] = [];
  for (const l of lines.slice(at + 1)) {
    if (!l.startsWith("  -> ")) break;
    servers.push(l.trim().split(/\s+/)[1]!);
  }
  return servers;
};

describe("IPVS engine in a routed network (QEMU guest, Node inside)", () => {
  let result: IpvsGuestResult;

  beforeAll(async () => {
    const dist = join(repoRoot(), "lb-image/dist/dataplane");
    const files: Record<string, string> = {};
    // A folder's code (and package.json files) under `guest`, keeping its layout.
    const walk = (from: string, guest: string, dir = from): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(from, guest, path);
        else if (/\.c?js$|^package\.json$/.test(e.name)) files[`${guest}/${relative(from, path)}`] = path;
      }
    };
    walk(dist, "/opt/plb/dataplane");
    // What the engines share with the rest of the app (the nft engine's command monitor).
    walk(join(repoRoot(), "lb-image/dist/common"), "/opt/plb/common");
    // The engines' one third-party dependency (the DSR tunnels parse `ip -j` with zod): ~3 MB.
    walk(join(repoRoot(), "node_modules/zod"), "/opt/plb/node_modules/zod");
    if (!files["/opt/plb/dataplane/ipvs/ipvsEngine.js"])
      throw new Error(`no built engine in ${dist}: run npm run build first`);
    const started = Date.now();
    result = await runInIpvsGuest({
      script,
      files: {
        "driver.js": DRIVER,
        "flows.js": FLOWS,
        "all.json": JSON.stringify(services(backendIps)),
        "without-b1.json": JSON.stringify(services(backendIps.slice(1))),
      },
      extra: guestNodeEntries(files),
      memoryMib: GUEST_NODE_MEMORY_MIB,
      timeoutMs: 400_000,
    });
    console.log(`routed IPVS guest: ${result.wallMs} ms in QEMU, ${Date.now() - started} ms in all`);
    if (result.exitCode !== 0) throw new Error(`guest script exited ${result.exitCode}:\n${result.output}`);
  }, 420_000);

  it("chooses IPVS in auto only once the namespace lets it masquerade", () => {
    expect(engineLines(result, "choose-off")).toEqual([
      { ns: lb2, op: "choose", engine: "nftables", reason: "ipvs-cannot-masquerade" },
    ]);
    expect(engineLines(result, "choose-on")).toEqual([
      { ns: lb2, op: "choose", engine: "ipvs", reason: "ipvs" },
    ]);
  });

  it("serves NAT mode through a masquerading table although backends route around the LB", () => {
    const pages = sectionOf(result, "nat").map(servedBy);
    expect(pages).toHaveLength(12);
    expect(pages.filter((p) => !backendIps.includes(p))).toEqual([]);
    expect(new Set(pages).size).toBeGreaterThan(1);
    expect(sectionOf(result, "snat-table").join("\n")).toMatch(
      /elements = \{ 10\.1\.1\.10 \. (6|tcp) \. 80 \}/,
    );
  });

  it("fails NAT mode without masquerading (the control), and a verification puts it back", () => {
    // (timeout's victims are reported by the shell as "Terminated".)
    expect(sectionOf(result, "unmasqueraded").filter((l) => l !== "Terminated")).toEqual([
      "request failed",
      "request failed",
    ]);
    const [repair] = engineLines(result, "repair");
    expect(repair).toMatchObject({ op: "verify", rebuilt: false });
    expect(repair!.repaired).toBeGreaterThan(0);
    // Only the masqueraded service differs (its table is gone); the DSR one needs none.
    expect(repair!.drift).toEqual([
      expect.objectContaining({ kind: "service", subject: `tcp:${snatVip}:80` }),
    ]);
    const pages = sectionOf(result, "nat-repaired").map(servedBy);
    expect(pages.filter((p) => !backendIps.includes(p))).toEqual([]);
  });

  it("serves tunnel mode (DSR): backends decapsulate and answer from the VIP", () => {
    const pages = sectionOf(result, "dsr").map(servedBy);
    expect(pages).toHaveLength(12);
    expect(pages.filter((p) => !backendIps.includes(p))).toEqual([]);
    expect(new Set(pages).size).toBeGreaterThan(1);
  });

  it("keeps mh servers in one kernel order whatever the history (literal ipvsadm does not)", () => {
    expect(dsrOrder(result, lb1)).toHaveLength(3);
    expect(dsrOrder(result, lb2)).toEqual(dsrOrder(result, lb1));
    expect(dsrOrder(result, lb3)).not.toEqual(dsrOrder(result, lb1));
  });

  it("two LBs with the same servers pick the same backend for every one of 200 flows", () => {
    /** "PORT BACKEND" per flow through `ns`, in port order. */
    const by = (ns: string) =>
      sectionOf(result, `flows ${ns}`)
        .filter((l) => l !== "")
        .map((l) => {
          const [port, ...page] = l.split(" ");
          return `${port} ${servedBy(page.join(" "))}`;
        });
    for (const ns of [lb1, lb2, lb3]) {
      expect(by(ns).map((f) => f.split(" ")[0])).toEqual(FLOW_PORTS.map(String));
      expect(by(ns).filter((f) => !backendIps.includes(f.split(" ")[1]!))).toEqual([]);
    }
    expect(by(lb2)).toEqual(by(lb1));
    const spread = new Map<string, number>();
    for (const f of by(lb1)) spread.set(f.split(" ")[1]!, (spread.get(f.split(" ")[1]!) ?? 0) + 1);
    expect(spread.size).toBe(3);
    // The control: another server order (lb3's history) moves flows, so agreeing is not luck.
    const moved = by(lb3).filter((f, i) => f !== by(lb1)[i]).length;
    expect(moved).toBeGreaterThan(0);
    console.log(
      `200 flows per LB; per backend on lb1 and lb2: ${[...spread].map(([b, n]) => `${b} ${n}`).join(", ")}; flows picking another backend on lb3 (other server order): ${moved} of ${FLOW_PORTS.length}`,
    );
  });

  it("keeps established connections on their backend while servers are deleted and re-added", () => {
    const readd = engineLines(result, "readd");
    expect(readd).toHaveLength(1);
    expect(readd[0]!.changes).toBeGreaterThan(2);
    for (const name of ["slow-dsr", "slow-nat"]) {
      const body = sectionOf(result, name).join("\n");
      expect(body).toMatch(
        new RegExp(`got later from (${backendIps.slice(1).join("|").replaceAll(".", "\\.")})$`, "m"),
      );
    }
  });
});
