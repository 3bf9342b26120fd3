// Direct server return through two LB pods behind an ECMP router, with the nftables engine of each
// pod programming its namespace as the controller would: the client's address reaches the backends,
// the backends answer the client directly, and keep-alive connections survive an LB leaving and
// rejoining the router's ECMP group and a backend being added (one Maglev table on every LB; a flow
// an LB has seen keeps its backend). The backend side is the node agent's DSR applier, run as the
// agent runs it, on a node that is strict about reverse paths and drops conntrack-INVALID packets
// in FORWARD (as kube-proxy does): it prepares the pods (decap device, VIP on lo, rp_filter) and the
// node (notrack for the VIP's replies, rp_filter, MSS clamp). Each LB pod runs on a node of its own,
// as strict, which routes the VIP to it (the node agent's pool route) and sees only the client's
// side of each flow: its agent untracks the traffic to the VIP, or kube-proxy's drop cuts flows
// that move between LBs.
//
//   client ── router ══ fabric ══ node ══ cni0 ══ p1, p2, p3
//                              ╚═ lbnode1 ══ cni0 ══ lb1;  lbnode2 ══ cni0 ══ lb2
import { join } from "node:path";
import { NetnsLab, waitUntil, type LabNamespace } from "@portable-lb/lab";
import { NftEngine } from "../../lb-image/src/dataplane/nft/nftEngine.ts";
import { backendMark } from "../../lb-image/src/dataplane/dsr/dsrTunnel.ts";
import type { VirtualService } from "../../lb-image/src/dataplane/model.ts";
import type { DsrApplier } from "../../lb-image/src/nodeAgent/dsr/dsrApplier.ts";
import { DSR_NODE_TABLE, parseNodeTable } from "../../lb-image/src/nodeAgent/dsr/nodeDsrTable.ts";
import { STEERING_TABLE, applySteering } from "../../lb-image/src/nodeAgent/podSteering.ts";
import { DsrBackendNode, KUBE_PROXY_LIKE } from "../harness/netns/dsrBackendNode.ts";
import { ruleCounters } from "../harness/netns/nftCounters.ts";
import { httpHistogram, startHttpEcho } from "../harness/netns/httpClient.ts";
import { repoRoot } from "../harness/repoRoot.ts";

const VIP = "10.1.1.10";
const PORT = 8080;
const PODS = { p1: "10.244.1.2", p2: "10.244.1.3", p3: "10.244.1.4" } as const;
/** The LB pods, each on its node's pod network (10.244.2.0/24 on lbnode1, .3.0/24 on lbnode2). */
const LBS = { lb1: "10.244.2.2", lb2: "10.244.3.2" } as const;
const LB_NODES = { lb1: "10.9.0.21", lb2: "10.9.0.22" } as const;
const CONNECTIONS = 40;
const NODE = "node";

let lab: NetnsLab;
let client: LabNamespace;
let router: LabNamespace;
const lbs = new Map<string, LabNamespace>();
const engines = new Map<string, NftEngine>();
let backendNode: DsrBackendNode | undefined;
/** The LB pods' nodes, each with its own node agent's applier. */
const lbNodes = new Map<string, { node: DsrBackendNode; agent: DsrApplier }>();
const pods: LabNamespace[] = [];
/** The node agent's applier: one for the run, as one agent serves the node. */
let agent: DsrApplier;

/** The DSR service; `draining` backends (terminating but serving) get weight 0. */
const service = (pods: (keyof typeof PODS)[], draining: (keyof typeof PODS)[] = []): VirtualService => ({
  vip: VIP,
  port: PORT,
  protocol: "tcp",
  scheduler: "mh",
  forwarding: "dsr",
  backends: pods.map((p) => ({
    ip: PODS[p],
    port: PORT,
    weight: draining.includes(p) ? 0 : 1,
    nodeName: NODE,
  })),
});

/** Beside the DSR services: a SNAT one on the same VIP, which must keep working (port 80 -> 8080). */
const snat: VirtualService = {
  ...service(["p1", "p2"]),
  port: 80,
  forwarding: "snat",
  backends: [PODS.p1, PODS.p2].map((ip) => ({ ip, port: PORT, weight: 1 })),
};

/** The node agent first (a new backend answers before an LB sends it anything), then every LB. */
async function applyAll(desired: VirtualService[]): Promise<void> {
  expect((await agent.apply([...desired, snat], NODE)).failures).toEqual([]);
  for (const [name, n] of lbNodes)
    expect((await n.agent.apply([...desired, snat], `lbnode-${name}`)).failures).toEqual([]);
  for (const engine of engines.values()) await engine.apply([...desired, snat]);
}

const routeVia = (lbNames: (keyof typeof LBS)[]) =>
  router.ip("route", "replace", `${VIP}/32`, ...lbNames.flatMap((n) => ["nexthop", "via", LB_NODES[n]]));

/** The packets the LB nodes' kube-proxy-like rule dropped as conntrack-INVALID. */
async function lbNodeInvalidDrops(): Promise<number> {
  let drops = 0;
  for (const n of lbNodes.values()) drops += (await ruleCounters(n.node.node, KUBE_PROXY_LIKE))[0] ?? -1;
  return drops;
}

/**
 * Conntrack entries of the tunnel (UDP 4789) in `ns`. Each connection's packets hash to a VXLAN
 * source port of their own, so a tracker that saw them keeps one such entry per connection.
 */
async function tunnelEntries(ns: LabNamespace): Promise<number> {
  const r = await ns.exec("cat", ["/proc/net/nf_conntrack"]);
  return r.stdout.split("\n").filter((l) => / udp .* dport=4789 /.test(l)).length;
}

interface KeepAliveResult {
  requests: number;
  opened: number;
  failures: { t: number; connection: number }[];
  backends: { t: number; connection: number; backend: string }[];
}

/** CONNECTIONS keep-alive connections from the client for `seconds`; `done` waits for their result. */
async function keepAliveLoad(
  name: string,
  seconds: number,
): Promise<{ done: () => Promise<KeepAliveResult> }> {
  const script = join(repoRoot(), "bench/lib/keepAliveClient.ts");
  const load = await client.spawn(
    name,
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      script,
      ...["--url", `http://${VIP}:${PORT}/`, "--connections", String(CONNECTIONS)],
      ...["--interval-ms", "100", "--seconds", String(seconds)],
    ],
    { marker: script },
  );
  return {
    done: async () => {
      expect(await waitUntil(() => !load.running(), (seconds + 10) * 1000)).toBe(true);
      return JSON.parse(load.lastLines(1)) as KeepAliveResult;
    },
  };
}

beforeAll(async () => {
  lab = await NetnsLab.create("dsr");
  client = await lab.namespace("client");
  router = await lab.namespace("router", { forwarding: true });
  await lab.link(client, router, { a: "10.0.0.2/24", b: "10.0.0.1/24" });
  await client.defaultRoute("10.0.0.1");
  await router.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
  const fabric = await lab.bridge(router, "fabric", "10.9.0.1/24");
  const node = await lab.namespace(NODE, { forwarding: true });
  await lab.attach(fabric, node, "10.9.0.20/24", "eth0");
  await node.defaultRoute("10.9.0.1");
  const cni = await lab.bridge(node, "cni0", "10.244.1.1/24");
  await router.route("10.244.1.0/24", "10.9.0.20");
  for (const [name, ip] of Object.entries(PODS)) {
    const pod = await lab.namespace(name);
    await lab.attach(cni, pod, `${ip}/24`, "eth0");
    await pod.defaultRoute("10.244.1.1");
    // Pods inherit the host's rp_filter; strict here, whatever the host has.
    await pod.sysctl("net.ipv4.conf.all.rp_filter", "1");
    await startHttpEcho(pod, { port: PORT, name });
    pods.push(pod);
  }
  backendNode = await DsrBackendNode.create(node, pods, ["cni0", "eth0"]);
  agent = backendNode.applier();
  for (const [name, ip] of Object.entries(LBS) as [keyof typeof LBS, string][]) {
    const lbNode = await lab.namespace(`lbnode-${name}`, { forwarding: true });
    await lab.attach(fabric, lbNode, `${LB_NODES[name]}/24`, "eth0");
    await lbNode.defaultRoute("10.9.0.1");
    await lbNode.route("10.244.1.0/24", "10.9.0.20");
    const podNet = ip.replace(/\.2$/, ".0/24");
    const lbCni = await lab.bridge(lbNode, "cni0", ip.replace(/\.2$/, ".1/24"));
    await router.route(podNet, LB_NODES[name]);
    // The node agent's VIP pool route: the VIP to the node's LB pod.
    await lbNode.route(`${VIP}/32`, ip);
    const lb = await lab.namespace(name, { forwarding: true });
    await lab.attach(lbCni, lb, `${ip}/24`, "eth0");
    await lb.defaultRoute(ip.replace(/\.2$/, ".1"));
    // Its one pod is the LB pod, no DSR backend: findable only for a handover's rp_filter.
    const strict = await DsrBackendNode.create(lbNode, [lb], ["cni0", "eth0"]);
    lbNodes.set(name, { node: strict, agent: strict.applier() });
    // As the controller makes every VIP local in its pod (LocalVips): DSR must still hand them on.
    await lb.localRoute(`${VIP}/32`);
    lbs.set(name, lb);
    const prefix = ["ip", "netns", "exec", lb.netns] as const;
    engines.set(name, new NftEngine([...prefix, "nft"], [...prefix, "ip"]));
  }
  await applyAll([service(["p1", "p2"])]);
  await routeVia(["lb1", "lb2"]);
}, 60_000);

afterAll(async () => {
  backendNode?.destroy();
  for (const n of lbNodes.values()) n.node.destroy();
  await lab?.destroy();
});

describe("DSR through two LB pods", () => {
  it("hands the client's own address to the backends, spread over both", async () => {
    const byClient = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 40, by: "client" });
    expect(byClient).toMatchObject({ failures: 0, counts: { "10.0.0.2": 40 } });
    const byName = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 40, by: "name" });
    expect(Object.keys(byName.counts).sort()).toEqual(["p1", "p2"]);
    // The SNAT service on the same LBs: the backends see an LB pod, not the client.
    const snatByClient = await httpHistogram(client, `http://${VIP}:80/`, { count: 40, by: "client" });
    expect(snatByClient.failures).toBe(0);
    expect(Object.keys(snatByClient.counts).sort()).toEqual(Object.values(LBS));
    // The LB nodes untrack what they forward to and from the VIP, and clamp nothing (no backends).
    for (const n of lbNodes.values())
      expect(
        parseNodeTable(await n.node.node.run("nft", ["-j", "list", "table", "ip", DSR_NODE_TABLE])),
      ).toEqual({
        vips: [VIP],
      });
  });

  it("keeps every keep-alive connection when an LB leaves and rejoins, a backend is added or drains; a removed backend costs only its own", async () => {
    const load = await keepAliveLoad("keepalive", 21);
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await pause(3_000);
    await routeVia(["lb2"]); // lb1 leaves: its flows move to lb2, which has not seen them
    await pause(3_000);
    await routeVia(["lb1", "lb2"]); // lb1 rejoins: half of the flows move back
    await pause(3_000);
    await applyAll([service(["p1", "p2", "p3"])]); // a backend is added on every LB
    await pause(3_000);
    await applyAll([service(["p1", "p2", "p3"], ["p2"])]); // p2 drains (terminating, serving)
    const drained = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 30, by: "name" });
    await pause(2_000);
    const removedAt = Date.now();
    await applyAll([service(["p1", "p3"])]); // and p2 removed (its pod still answers)
    const result = await load.done();
    // Nothing failed until the removal; after it, only connections p2 was serving.
    const servedBy = new Map<number, string>();
    for (const b of result.backends) if (b.t < removedAt) servedBy.set(b.connection, b.backend);
    const p2Connections = [...servedBy].filter(([, b]) => b === "p2").map(([c]) => c);
    console.log(
      `backend removed: ${p2Connections.length} of ${CONNECTIONS} connections were on p2; ` +
        `${new Set(result.failures.map((f) => f.connection)).size} connections failed`,
    );
    expect(result.failures.filter((f) => f.t < removedAt)).toEqual([]);
    // While p2 drained, its connections went on (above) and new ones went elsewhere.
    expect(Object.keys(drained.counts).sort()).toEqual(["p1", "p3"]);
    expect(p2Connections.length).toBeGreaterThan(0);
    expect(result.failures.filter((f) => !p2Connections.includes(f.connection))).toEqual([]);
    // Each of them failed once and came back on another backend; the rest were never reopened.
    expect(result.opened).toBeLessThanOrEqual(CONNECTIONS + p2Connections.length);
    expect(result.requests).toBeGreaterThan(CONNECTIONS * 50);
    // The flows that moved between LBs reached a node that had not seen their start: untracked.
    expect(await lbNodeInvalidDrops()).toBe(0);
    // Nor is the tunnel tracked, where its packets leave (LB pods), pass (nodes) or end (pods).
    const tracked = [
      ...lbs.values(),
      ...[...lbNodes.values()].map((l) => l.node.node),
      backendNode!.node,
      ...pods,
    ];
    expect(await Promise.all(tracked.map(tunnelEntries))).toEqual(tracked.map(() => 0));
    // New connections use the added backend, and none the removed one.
    const byName = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 60, by: "name" });
    expect(Object.keys(byName.counts).sort()).toEqual(["p1", "p3"]);
    await applyAll([service(["p1", "p2", "p3"])]);
  }, 60_000);

  it("starts a new connection by the Maglev table whatever the flow table remembers of its port", async () => {
    // The backends now: p1, p2, p3. Client ports below the ephemeral range, unused so far.
    const url = `http://${VIP}:${PORT}/`;
    const ask = async (port: number) => {
      const r = await client.exec("curl", [
        ...["-s", "-o", "/dev/null", "--max-time", "2", "--local-port", String(port)],
        ...["-w", "%header{x-backend-name}", url],
      ]);
      return r.code === 0 ? r.stdout.trim() : `curl exit ${r.code}`;
    };
    const remember = async (ports: number[], backend: string) => {
      const mark = `0x${backendMark(backend).toString(16)}`;
      const elements = ports.map((p) => `10.0.0.2 . ${p} . ${VIP} . ${PORT} : ${mark}`).join(", ");
      for (const lb of lbs.values())
        await lb.run("nft", ["add", "element", "ip", "portable_lb", "flows_tcp", `{ ${elements} }`]);
    };
    // Entries as earlier connections on these client ports left them, all to p1 (a live backend):
    // a SYN passes over them, so each new connection takes the backend every LB pod's Maglev table
    // gives it (an LB pod it moves to mid-flight picks the same one), not p1 alone.
    const reused = Array.from({ length: 20 }, (_, i) => 20_000 + i);
    await remember(reused, PODS.p1);
    const picked = await Promise.all(reused.map(ask));
    expect(picked.filter((b) => !["p1", "p2", "p3"].includes(b))).toEqual([]);
    expect(new Set(picked).size).toBe(3);
    // Entries to a backend that has left (no tunnel, no rule for its mark): the new connections
    // take the Maglev table's backends, never this LB pod's own stack (which would refuse them).
    const stale = Array.from({ length: 30 }, (_, i) => 20_100 + i);
    await remember(stale, "10.244.1.99");
    const answers = await Promise.all(stale.map(ask));
    expect(answers.filter((b) => !["p1", "p2", "p3"].includes(b))).toEqual([]);
    expect(new Set(answers).size).toBe(3);
  });

  it("drops a client outside the DSR service's source ranges in every LB pod, before the flow table", async () => {
    const url = `http://${VIP}:${PORT}/`;
    const all = service(["p1", "p2", "p3"]);
    const probe = () => httpHistogram(client, url, { count: 6, by: "name", requestTimeoutMs: 500 });
    // The client (10.0.0.2) is outside: every request times out (dropped, not reset), through
    // either LB pod, while the unrestricted SNAT service on the same VIP still answers.
    await applyAll([{ ...all, sourceRanges: ["192.0.2.0-192.0.2.255"] }]);
    const refused = await probe();
    expect(refused.answered).toBe(0);
    expect(Object.keys(refused.errors).join()).toMatch(/timed out/i);
    expect((await httpHistogram(client, `http://${VIP}:80/`, { count: 6 })).failures).toBe(0);
    // Admitted, then unrestricted: served again, and no firewall table is left in an LB pod.
    await applyAll([{ ...all, sourceRanges: ["10.0.0.2-10.0.0.2"] }]);
    expect((await probe()).failures).toBe(0);
    await applyAll([all]);
    expect((await probe()).failures).toBe(0);
    for (const lb of lbs.values())
      expect((await lb.exec("nft", ["list", "table", "ip", "portable_lb_firewall"])).code).not.toBe(0);
  });

  it("hands over: an LB pod of another platform relays the flows it did not see start, and none is reset", async () => {
    // lb1 is platform A's LB pod (backends p1, p2); lb2 becomes platform B's (backend p3), taking
    // A's VIP over. Both LB pods strict about reverse paths, whatever the host has.
    for (const lb of lbs.values()) await lb.sysctl("net.ipv4.conf.all.rp_filter", "1");
    const a = service(["p1", "p2"]);
    const b = (relay: "all" | "established"): VirtualService => ({
      ...service(["p3"]),
      handover: { to: [LB_NODES.lb1], relay },
    });
    const [lbA, lbB] = [engines.get("lb1")!, engines.get("lb2")!];
    const applyBoth = async (onB: VirtualService) => {
      expect((await agent.apply([service(["p1", "p2", "p3"]), snat], NODE)).failures).toEqual([]);
      for (const [name, n] of lbNodes)
        expect((await n.agent.apply([a, snat], `lbnode-${name}`)).failures).toEqual([]);
      await lbA.apply([a, snat]);
      await lbB.apply([onB, snat]);
    };
    await applyBoth(service(["p1", "p2"]));
    await routeVia(["lb1"]);
    // A's LB node takes what B's LB pod relays (its node agent's steering, and no rp_filter on its
    // LB pod's tunnel device).
    const nodeA = lbNodes.get("lb1")!;
    const steerNft: [string, ...string[]] = ["setpriv", ...nodeA.node.agentPrefix().slice(1), "nft"];
    const steer = (handoverPeers: string[]) =>
      applySteering(steerNft, { podIp: LBS.lb1, reflectors: [], handoverPeers });
    expect(await steer([LBS.lb2, LB_NODES.lb2])).toBe(true);

    const load = await keepAliveLoad("keepalive-handover", 15);
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await pause(2_000);
    await applyBoth(b("all"));
    expect(await nodeA.agent.openRelayTarget(LBS.lb1)).toBe(true);
    expect(await nodeA.agent.openRelayTarget(LBS.lb1)).toBe(false);
    // Off where relayed flows arrive, and the uplink as strict as before (all was strict).
    const conf = await lbs.get("lb1")!.ip("-4", "netconf", "show");
    expect(conf).toMatch(/inet plb-dsr .*rp_filter off/);
    expect(conf).toMatch(/inet all .*rp_filter off/);
    expect(conf).toMatch(/inet eth0 .*rp_filter strict/);
    await routeVia(["lb1", "lb2"]); // B announces too: about half of A's flows move to lb2
    await pause(3_000);
    await routeVia(["lb2"]); // A withdraws: all of them
    await pause(3_000);
    await applyBoth(b("established")); // new connections are B's from now on
    const fresh = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 20, by: "name" });
    const result = await load.done();
    const backendsOf = new Map<number, Set<string>>();
    for (const r of result.backends)
      backendsOf.set(r.connection, (backendsOf.get(r.connection) ?? new Set()).add(r.backend));
    console.log(
      `handover: ${result.requests} requests on ${result.opened} connections, ${result.failures.length} failed; new connections after the withdrawal: ${JSON.stringify(fresh.counts)}`,
    );
    // Every keep-alive connection went on, on its one backend of A, through either platform.
    expect(result.failures).toEqual([]);
    expect(result.opened).toBe(CONNECTIONS);
    expect(result.requests).toBeGreaterThan(CONNECTIONS * 50);
    expect([...backendsOf.values()].filter((s) => s.size !== 1)).toEqual([]);
    expect(new Set([...backendsOf.values()].flatMap((s) => [...s]))).toEqual(new Set(["p1", "p2"]));
    // New connections take B's backend.
    expect(fresh).toMatchObject({ failures: 0, counts: { p3: 20 } });

    // The handover ends: A's steering goes, B serves by its own table alone.
    expect(await steer([])).toBe(true);
    expect((await nodeA.node.node.exec("nft", ["list", "table", "ip", STEERING_TABLE])).code).not.toBe(0);
    await applyAll([service(["p1", "p2", "p3"])]);
    expect(await lbB.apply([service(["p1", "p2", "p3"]), snat])).toMatchObject({ drift: [] });
    for (const lb of lbs.values())
      expect(await lb.ip("route", "show", "table", "all", "proto", "212")).not.toContain(LB_NODES.lb1);
    await routeVia(["lb1", "lb2"]);
  }, 90_000);

  it("removes every DSR tunnel and the node's DSR state when no service is served by DSR (the SNAT one stays)", async () => {
    await applyAll([]);
    for (const lb of lbs.values()) {
      expect(await lb.ip("-br", "link", "show", "type", "vxlan")).toBe("");
      expect(await lb.ip("route", "show", "table", "all", "proto", "212")).toBe("");
    }
    for (const n of [backendNode!, ...[...lbNodes.values()].map((l) => l.node)])
      expect((await n.node.exec("nft", ["list", "table", "ip", DSR_NODE_TABLE])).code).not.toBe(0);
    for (const pod of pods) expect(await pod.ip("-br", "link", "show", "type", "vxlan")).toBe("");
  });
});
