// The LB pod's DSR fast path (lb-image/fastpath) over the nftables engine's kernel path: the loader
// runs in the LB pod's namespace with CAP_NET_ADMIN and CAP_BPF only, as the controller runs it.
// Every TCP and UDP flow reaches the backend the kernel path alone gives it (the Maglev table and
// the hash are nft's, bit for bit), the backends see the client's address, keep-alive connections
// keep their backend when one is added (also those the kernel path began before the fast path
// started), `check` repairs a deleted map entry, a removed Maglev table and a detached program, and
// when the loader's stdin closes its program goes and the kernel path carries on. The LB pod hands its tunnel packets
// straight to its veth's node side (bpf_redirect_peer). The LB node's programs (`portable-lb-fastpath
// node`, with the node agent's capabilities) carry the VIP's packets from the node's uplink into
// the LB pod and the tunnel packets back out, none of them through the node's forwarding (its
// netfilter counts none), follow the node's routes, leave a pod they cannot attach to to the
// kernel, repair what someone detached, and go when their loader does.
//
//   client ── router ══ fabric ══ node ══ cni0 ══ p1, p2, p3   (backends, prepared by the node agent)
//                              ╚═ lbnode ══ cni0 ══ lb          (NftEngine in DSR mode + fast path)
import { join } from "node:path";
import { NetnsLab, waitUntil, type LabNamespace } from "@portable-lb/lab";
import { FastPath } from "../../lb-image/src/dataplane/fastpath/fastPath.ts";
import type { LoaderHook } from "../../lb-image/src/dataplane/fastpath/loaderProcess.ts";
import { NodeFastPath } from "../../lb-image/src/dataplane/fastpath/nodeFastPath.ts";
import { canonical, type VirtualService } from "../../lb-image/src/dataplane/model.ts";
import { maglevTable } from "../../lb-image/src/dataplane/nft/maglev.ts";
import { NftEngine } from "../../lb-image/src/dataplane/nft/nftEngine.ts";
import type { DsrApplier } from "../../lb-image/src/nodeAgent/dsr/dsrApplier.ts";
import { builtFastPath, fastPathBuild } from "../harness/fastPathBuild.ts";
import { DsrBackendNode } from "../harness/netns/dsrBackendNode.ts";
import { httpHistogram, startHttpEcho } from "../harness/netns/httpClient.ts";
import { repoRoot } from "../harness/repoRoot.ts";

const VIP = "10.1.1.10";
const PORT = 8080;
const UDP_PORT = 9000;
const KEY = `tcp:${VIP}:${PORT}`;
const PODS = { p1: "10.244.1.2", p2: "10.244.1.3", p3: "10.244.1.4" } as const;
const LB = "10.244.2.2";
const NODE = "node";
/** The loader, as the bootstrap builds it. */
const BINARY = fastPathBuild().loader;
/** Client flows compared between the two paths, each with its own fixed source port. */
const FLOWS = 200;

let lab: NetnsLab;
let client: LabNamespace;
let lb: LabNamespace;
let lbNode: LabNamespace;
let engine: NftEngine;
let backendNode: DsrBackendNode | undefined;
let agent: DsrApplier;
let fastPath: FastPath | undefined;

/** The DSR services: HTTP over TCP, and a UDP one whose backends answer with their name. */
const services = (pods: (keyof typeof PODS)[]): VirtualService[] =>
  (
    [
      ["tcp", PORT],
      ["udp", UDP_PORT],
    ] as const
  ).map(([protocol, port]) => ({
    vip: VIP,
    port,
    protocol,
    scheduler: "mh",
    forwarding: "dsr",
    backends: pods.map((p) => ({ ip: PODS[p], port, weight: 1, nodeName: NODE })),
  }));

/** The service's Maglev table as nftRuleset renders it: slot i -> the backend of maglevTable's slot i. */
function table(s: VirtualService): string[] {
  const sorted = canonical([s])[0]!.backends;
  return maglevTable(sorted).map((i) => sorted[i]!.ip);
}

/** The kernel path first (the node agent, then the engine), then the fast path, as the controller would. */
async function applyAll(desired: VirtualService[]): Promise<void> {
  expect((await agent.apply(desired, NODE)).failures).toEqual([]);
  await engine.apply(desired);
  await syncFastPath(desired);
}

async function syncFastPath(desired: VirtualService[]): Promise<void> {
  await fastPath?.sync(
    desired.map((s) => ({ vip: s.vip, port: s.port, protocol: s.protocol, table: table(s) })),
    [...new Set(desired.flatMap((s) => s.backends.map((b) => b.ip)))],
  );
}

function startFastPath(hook?: LoaderHook): Promise<FastPath> {
  return FastPath.start({
    binary: BINARY,
    device: "eth0",
    ...(hook && { hook }),
    prefix: [
      "ip",
      "netns",
      "exec",
      lb.netns,
      "setpriv",
      "--bounding-set=-all,+net_admin,+bpf",
      "--inh-caps=-all",
    ],
  });
}

/** The backend that answers a new connection from the client's source port `port`. */
async function backendFrom(port: number): Promise<string> {
  const r = await client.exec("curl", [
    ...["-s", "-o", "/dev/null", "--max-time", "2", "--local-port", String(port)],
    ...["-w", "%header{x-backend-name}", `http://${VIP}:${PORT}/`],
  ]);
  return r.code === 0 ? r.stdout.trim() : `curl exit ${r.code}`;
}

/** Source port -> backend for every flow, 20 at a time. */
async function backendsByPort(ports: number[]): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  for (let i = 0; i < ports.length; i += 20) {
    const batch = ports.slice(i, i + 20);
    const answers = await Promise.all(batch.map(backendFrom));
    batch.forEach((p, j) => out.set(p, answers[j]!));
  }
  return out;
}

// One datagram per source port, from the client's address; the answer is the backend's name.
const UDP_CLIENT = `
import json, socket, sys
out = {}
for port in range(int(sys.argv[1]), int(sys.argv[2])):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("10.0.0.2", port))
    s.settimeout(1)
    s.sendto(b"?", ("${VIP}", ${UDP_PORT}))
    try:
        out[port] = s.recv(100).decode()
    except socket.timeout:
        out[port] = "timeout"
    s.close()
print(json.dumps(out))
`;
// Bound to the VIP, so the answer comes from it; before the node agent puts it on the pod's lo
// (IP_FREEBIND).
const UDP_SERVER = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_IP, 15, 1)
s.bind(("${VIP}", ${UDP_PORT}))
while True:
    _, peer = s.recvfrom(100)
    s.sendto(sys.argv[1].encode(), peer)
`;

/** Source port -> the backend that answered a UDP datagram from it. */
async function udpBackendsByPort(first: number, count: number): Promise<Record<string, string>> {
  const args = ["-c", UDP_CLIENT, String(first), String(first + count)];
  return JSON.parse(await client.run("python3", args, { timeoutMs: 60_000 })) as Record<string, string>;
}

/** Keep-alive connections for `seconds`, each sending a request every 100 ms. */
function keepAlive(connections: number, seconds: number) {
  const script = join(repoRoot(), "bench/lib/keepAliveClient.ts");
  return client.spawn(
    "keepalive",
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      script,
      ...["--url", `http://${VIP}:${PORT}/`, "--connections", String(connections), "--interval-ms", "100"],
      ...["--seconds", String(seconds)],
    ],
    { marker: script },
  );
}

/** The backends of a keep-alive run that had no failure and each connection answered by one backend. */
function keptBackends(lastLine: string, connections: number): Set<string> {
  const result = JSON.parse(lastLine) as {
    requests: number;
    opened: number;
    failures: unknown[];
    backends: { connection: number; backend: string }[];
  };
  expect(result.failures).toEqual([]);
  expect(result.opened).toBe(connections);
  expect(result.requests).toBeGreaterThan(connections * 30);
  const perConnection = new Map<number, Set<string>>();
  for (const b of result.backends)
    perConnection.set(b.connection, (perConnection.get(b.connection) ?? new Set()).add(b.backend));
  expect([...perConnection.values()].filter((b) => b.size !== 1)).toEqual([]);
  return new Set(result.backends.map((b) => b.backend));
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** bpftool's JSON answer (run on the host: program, map and link ids are global). */
async function bpftool<T>(...args: string[]): Promise<T> {
  return JSON.parse(await lb.run("bpftool", ["-j", ...args])) as T;
}

/** The node agent's loader, with the capabilities the agent's container has (DSR: + SYS_ADMIN). */
function startNodeFastPath(hook?: LoaderHook): Promise<NodeFastPath> {
  return NodeFastPath.start({
    binary: BINARY,
    ...(hook && { hook }),
    prefix: [
      ...["ip", "netns", "exec", lbNode.netns, "setpriv"],
      ...["--bounding-set=-all,+net_admin,+sys_admin", "--inh-caps=-all"],
    ],
  });
}

/** The LB pod's veth, node side (what the agent learns from the pod's namespace). */
async function lbVeth(): Promise<number> {
  const [eth0] = JSON.parse(await lb.run("ip", ["-j", "-4", "addr", "show", "dev", "eth0"])) as {
    link_index: number;
  }[];
  return eth0!.link_index;
}

/** Packets the LB node forwarded to the VIP through its IP stack (an nft counter in its forward hook). */
async function nodeForwarded(): Promise<number> {
  const out = JSON.parse(await lbNode.run("nft", ["-j", "list", "counter", "inet", "plbtest", "vip"])) as {
    nftables: { counter?: { packets: number } }[];
  };
  return out.nftables.find((o) => o.counter)!.counter!.packets;
}

/** Our tc filters on a device's ingress (pref 65000, lb-image/fastpath/attach.go), by program name. */
async function tcIngress(ns: LabNamespace, ifindex: number): Promise<string[]> {
  const links = JSON.parse(await ns.run("ip", ["-j", "link", "show"])) as {
    ifindex: number;
    ifname: string;
  }[];
  const dev = links.find((l) => l.ifindex === ifindex)!.ifname;
  const filters = JSON.parse(await ns.run("tc", ["-j", "filter", "show", "dev", dev, "ingress"])) as {
    pref: number;
    options?: { bpf_name?: string; prog?: { name: string } };
  }[];
  return filters.filter((f) => f.pref === 65000 && f.options?.prog).map((f) => f.options!.prog!.name);
}

/** Whether the device has a clsact qdisc. */
async function hasClsact(ns: LabNamespace, dev: string): Promise<boolean> {
  const qdiscs = JSON.parse(await ns.run("tc", ["-j", "qdisc", "show", "dev", dev])) as { kind: string }[];
  return qdiscs.some((q) => q.kind === "clsact");
}

/** The LB pod's eth0 transmit count: the tunnel packets it hands its veth's peer are not among them. */
async function lbTransmitted(): Promise<number> {
  const [eth0] = JSON.parse(await lb.run("ip", ["-j", "-s", "link", "show", "dev", "eth0"])) as {
    stats64: { tx: { packets: number } };
  }[];
  return eth0!.stats64.tx.packets;
}

const answered = async (count: number) =>
  (await httpHistogram(client, `http://${VIP}:${PORT}/`, { count, by: "client" })).counts;

beforeAll(async () => {
  builtFastPath();
  lab = await NetnsLab.create("dsrfp");
  client = await lab.namespace("client");
  // Each flow is made twice on the same source port: no TIME_WAIT may hold the port in between.
  await client.sysctl("net.ipv4.tcp_max_tw_buckets", "0");
  const router = await lab.namespace("router", { forwarding: true });
  await lab.link(client, router, { a: "10.0.0.2/24", b: "10.0.0.1/24" });
  await client.defaultRoute("10.0.0.1");
  const fabric = await lab.bridge(router, "fabric", "10.9.0.1/24");
  const node = await lab.namespace(NODE, { forwarding: true });
  await lab.attach(fabric, node, "10.9.0.20/24", "eth0");
  await node.defaultRoute("10.9.0.1");
  const cni = await lab.bridge(node, "cni0", "10.244.1.1/24");
  await router.route("10.244.1.0/24", "10.9.0.20");
  const pods: LabNamespace[] = [];
  for (const [name, ip] of Object.entries(PODS)) {
    const pod = await lab.namespace(name);
    await lab.attach(cni, pod, `${ip}/24`, "eth0");
    await pod.defaultRoute("10.244.1.1");
    await pod.sysctl("net.ipv4.conf.all.rp_filter", "1");
    await pod.sysctl("net.ipv4.tcp_max_tw_buckets", "0");
    await startHttpEcho(pod, { port: PORT, name });
    await pod.spawn("udp-echo", "python3", ["-c", UDP_SERVER, name], { marker: UDP_SERVER });
    pods.push(pod);
  }
  backendNode = await DsrBackendNode.create(node, pods, ["cni0", "eth0"]);
  agent = backendNode.applier();
  lbNode = await lab.namespace("lbnode", { forwarding: true });
  await lab.attach(fabric, lbNode, "10.9.0.21/24", "eth0");
  await lbNode.defaultRoute("10.9.0.1");
  await lbNode.route("10.244.1.0/24", "10.9.0.20");
  const lbCni = await lab.bridge(lbNode, "cni0", "10.244.2.1/24");
  await router.route("10.244.2.0/24", "10.9.0.21");
  await router.route(`${VIP}/32`, "10.9.0.21");
  await lbNode.route(`${VIP}/32`, LB);
  lb = await lab.namespace("lb", { forwarding: true });
  await lab.attach(lbCni, lb, `${LB}/24`, "eth0");
  await lb.defaultRoute("10.244.2.1");
  await lb.localRoute(`${VIP}/32`);
  const prefix = ["ip", "netns", "exec", lb.netns] as const;
  engine = new NftEngine([...prefix, "nft"], [...prefix, "ip"]);
  await applyAll(services(["p1", "p2"]));
  const udpUp = async () => !Object.values(await udpBackendsByPort(20_000, 1)).includes("timeout");
  expect(await waitUntil(udpUp, 10_000)).toBe(true);
}, 60_000);

let nodeFastPath: NodeFastPath | undefined;

afterAll(async () => {
  await nodeFastPath?.close();
  await fastPath?.close();
  backendNode?.destroy();
  await lab?.destroy();
});

describe("DSR fast path over the nftables path", () => {
  it("sends every flow to the backend the kernel path alone sends it to", async () => {
    const all = services(["p1", "p2", "p3"]);
    await applyAll(all);
    const ports = Array.from({ length: FLOWS }, (_, i) => 21_000 + i);
    const kernel = await backendsByPort(ports);
    expect([...kernel.values()].filter((b) => !["p1", "p2", "p3"].includes(b))).toEqual([]);
    expect(new Set(kernel.values()).size).toBe(3);
    const kernelUdp = await udpBackendsByPort(22_000, FLOWS);
    expect(new Set(Object.values(kernelUdp))).toEqual(new Set(["p1", "p2", "p3"]));

    fastPath = await startFastPath();
    expect(fastPath.programId).toBeGreaterThan(0);
    await syncFastPath(all);
    const before = await fastPath.stats();
    const fast = await backendsByPort(ports);
    const after = await fastPath.stats();
    expect(Object.fromEntries(fast)).toEqual(Object.fromEntries(kernel));
    // The traffic took the fast path: at least a SYN, the request and an ACK per flow.
    expect(after.forwarded - before.forwarded).toBeGreaterThanOrEqual(3 * FLOWS);
    expect((after.flows[KEY] ?? 0) - (before.flows[KEY] ?? 0)).toBeGreaterThanOrEqual(FLOWS);
    expect(await udpBackendsByPort(22_000, FLOWS)).toEqual(kernelUdp);
    const udpKey = `udp:${VIP}:${UDP_PORT}`;
    expect(((await fastPath.stats()).flows[udpKey] ?? 0) - (after.flows[udpKey] ?? 0)).toBe(FLOWS);
  }, 60_000);

  it("hands the client's own address to the backends, every packet of each connection by itself", async () => {
    const before = await fastPath!.stats();
    expect(await answered(40)).toEqual({ "10.0.0.2": 40 });
    const after = await fastPath!.stats();
    expect(after.forwarded - before.forwarded).toBeGreaterThanOrEqual(40 * 3);
    // The ACKs after the client's FIN find the closing flow's entry: none is left to the kernel path.
    expect((after.passed.unknown_flow ?? 0) - (before.passed.unknown_flow ?? 0)).toBe(0);
  });

  it("keeps every keep-alive connection on its backend when a backend is added", async () => {
    await applyAll(services(["p1", "p2"]));
    const load = await keepAlive(30, 8);
    await pause(3_000);
    await applyAll(services(["p1", "p2", "p3"]));
    expect(await waitUntil(() => !load.running(), 20_000)).toBe(true);
    // None moved to the added backend, which new connections do reach.
    expect(keptBackends(load.lastLines(1), 30)).toEqual(new Set(["p1", "p2"]));
    const byName = await httpHistogram(client, `http://${VIP}:${PORT}/`, { count: 40, by: "name" });
    expect(Object.keys(byName.counts).sort()).toEqual(["p1", "p2", "p3"]);
  }, 40_000);

  it("repairs a deleted map entry, a removed table and a detached program on check", async () => {
    const fp = fastPath!;
    expect((await fp.check()).drift).toEqual([]);
    const prog = await bpftool<{ map_ids: number[] }>("prog", "show", "id", String(fp.programId));
    const maps = await Promise.all(
      prog.map_ids.map((id) => bpftool<{ id: number; name: string }>("map", "show", "id", String(id))),
    );
    const services = maps.find((m) => m.name === "services")!;
    // The service's key: VIP, port (network order), protocol, padding.
    const key = [...VIP.split("."), "0x1f", "0x90", "6", "0"];
    await lb.run("bpftool", ["map", "delete", "id", String(services.id), "key", ...key]);
    const served = await fp.stats();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 }); // by the kernel path
    expect((await fp.stats()).forwarded).toBe(served.forwarded);
    expect((await fp.check()).drift.join("\n")).toMatch(/^services: 1 entries missing/m);
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fp.stats()).forwarded).toBeGreaterThan(served.forwarded);

    // The service's Maglev table taken out of the map of tables (the service sorts first: id 0).
    const tables = maps.find((m) => m.name === "tables")!;
    await lb.run("bpftool", ["map", "delete", "id", String(tables.id), "key", "0", "0", "0", "0"]);
    const unmapped = await fp.stats();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fp.stats()).forwarded).toBe(unmapped.forwarded);
    expect((await fp.stats()).passed.no_slot).toBeGreaterThan(unmapped.passed.no_slot ?? 0);
    expect((await fp.check()).drift.join("\n")).toMatch(
      /^tables: 1 entries missing or different \(e\.g\. 0\)/m,
    );
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fp.stats()).forwarded).toBeGreaterThan(unmapped.forwarded);

    const links = await bpftool<{ id: number; prog_id: number }[]>("link", "show");
    const ours = links.find((l) => l.prog_id === fp.programId)!;
    await lb.run("bpftool", ["link", "detach", "id", String(ours.id)]);
    const detached = await fp.stats();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fp.stats()).forwarded).toBe(detached.forwarded);
    expect((await fp.check()).drift.join("\n")).toMatch(/not attached to eth0 tcx ingress: attached again/);
    expect((await fp.check()).drift).toEqual([]);
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fp.stats()).forwarded).toBeGreaterThan(detached.forwarded);
  });

  it("detaches when its stdin closes, and the kernel path carries on", async () => {
    const id = fastPath!.programId;
    let died: Error | undefined;
    fastPath!.onExit((e) => (died = e));
    await fastPath!.close();
    fastPath = undefined;
    expect(
      await waitUntil(
        async () => (await lb.exec("bpftool", ["prog", "show", "id", String(id)])).code !== 0,
        5_000,
      ),
    ).toBe(true);
    expect(died).toBeUndefined();
    expect(await answered(20)).toEqual({ "10.0.0.2": 20 });
  });

  it("leaves the connections the kernel path began to it when it starts", async () => {
    await applyAll(services(["p1", "p2"]));
    const load = await keepAlive(30, 8);
    await pause(3_000);
    // A backend added as the fast path starts: the nft flow table keeps each connection's backend.
    await applyAll(services(["p1", "p2", "p3"]));
    fastPath = await startFastPath();
    await syncFastPath(services(["p1", "p2", "p3"]));
    expect(await waitUntil(() => !load.running(), 20_000)).toBe(true);
    expect(keptBackends(load.lastLines(1), 30)).toEqual(new Set(["p1", "p2"]));
    expect((await fastPath.stats()).passed.unknown_flow).toBeGreaterThan(30);
  }, 40_000);

  it("hands the tunnel packets to the LB pod's veth peer, not through its transmit", async () => {
    expect(await answered(5)).toEqual({ "10.0.0.2": 5 }); // the gateway's neighbour known
    const before = { stats: await fastPath!.stats(), tx: await lbTransmitted() };
    expect(await answered(40)).toEqual({ "10.0.0.2": 40 });
    const forwarded = (await fastPath!.stats()).forwarded - before.stats.forwarded;
    expect(forwarded).toBeGreaterThanOrEqual(40 * 3);
    // The forwarded packets did not go through eth0's transmit (what the kernel path sent, and an
    // ARP, may).
    expect((await lbTransmitted()) - before.tx).toBeLessThan(forwarded / 10);
  });

  it("on the LB node, carries the VIP's packets between uplink and LB pod past the node's stack", async () => {
    await lbNode.run("nft", ["-f", "-"], {
      input: `table inet plbtest {
        counter vip {}
        chain forward { type filter hook forward priority 0; ip daddr ${VIP} counter name vip; ip protocol udp udp dport 4789 counter name vip; }
      }`,
    });
    const veth = await lbVeth();
    nodeFastPath = await startNodeFastPath();
    expect(nodeFastPath.programId).toBeGreaterThan(0);
    const synced = await nodeFastPath.sync(["eth0"], [`${VIP}/32`], [{ ip: LB, ifindex: veth }]);
    expect(synced.skipped).toEqual([]);
    expect(synced.changes).toBeGreaterThanOrEqual(4); // 3 map entries, 2 programs attached
    const before = {
      node: await nodeFastPath.stats(),
      lb: await fastPath!.stats(),
      nft: await nodeForwarded(),
    };
    expect(await answered(40)).toEqual({ "10.0.0.2": 40 });
    const node = await nodeFastPath.stats();
    const lbForwarded = (await fastPath!.stats()).forwarded - before.lb.forwarded;
    expect(node.to_pod! - before.node.to_pod!).toBeGreaterThanOrEqual(40 * 3);
    // Every packet the pod's fast path tunnelled left the node by the node's program (and those its
    // kernel path tunnelled too: the same VXLAN).
    expect(node.from_pod! - before.node.from_pod!).toBeGreaterThanOrEqual(lbForwarded);
    expect(await nodeForwarded()).toBe(before.nft);
  });

  it("on the LB node, follows the node's routes, and leaves a pod it cannot attach to to the kernel", async () => {
    const fp = nodeFastPath!;
    // The VIP routed elsewhere: the node's program leaves its packets alone.
    await lbNode.run("ip", ["route", "replace", `${VIP}/32`, "via", "10.244.2.9"]);
    await lbNode.run("ip", ["neigh", "replace", "10.244.2.9", "lladdr", "02:00:00:00:00:09", "dev", "cni0"]);
    const before = await fp.stats();
    await client.exec("curl", ["-s", "--max-time", "1", `http://${VIP}:${PORT}/`]);
    expect((await fp.stats()).to_pod).toBe(before.to_pod);
    await lbNode.run("ip", ["route", "replace", `${VIP}/32`, "via", LB]);
    // A pod whose veth is gone: skipped, its entry left out, and the LB pod still served by the program.
    const synced = await fp.sync(
      ["eth0"],
      [`${VIP}/32`],
      [
        { ip: LB, ifindex: await lbVeth() },
        { ip: "10.244.2.7", ifindex: 999 },
      ],
    );
    expect(synced.skipped.join("\n")).toMatch(/^pod 10\.244\.2\.7: /);
    const nft = await nodeForwarded();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect(await nodeForwarded()).toBe(nft);
  });

  it("on the LB node, repairs a detached program on check, and goes with its loader", async () => {
    const fp = nodeFastPath!;
    expect((await fp.check()).drift).toEqual([]);
    const links = await bpftool<{ id: number; prog_id: number }[]>("link", "show");
    const toPod = links.find((l) => l.prog_id === fp.programId)!;
    await lb.run("bpftool", ["link", "detach", "id", String(toPod.id)]);
    const nft = await nodeForwarded();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect(await nodeForwarded()).toBeGreaterThan(nft); // the node's stack carried them
    expect((await fp.check()).drift.join("\n")).toMatch(
      /to_lb_pod not attached to ifindex \d+'s tcx ingress/,
    );
    const repaired = await nodeForwarded();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect(await nodeForwarded()).toBe(repaired);

    await fp.close();
    nodeFastPath = undefined;
    const gone = await nodeForwarded();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect(await nodeForwarded()).toBeGreaterThan(gone);
  });

  it("on kernels without tcx (the tc hook, forced here), carries the same packets on tc filters, repairs them and removes them", async () => {
    await fastPath!.close();
    fastPath = await startFastPath("tc");
    nodeFastPath = await startNodeFastPath("tc");
    expect([fastPath.hook, nodeFastPath.hook]).toEqual(["tc", "tc"]);
    await syncFastPath(services(["p1", "p2", "p3"]));
    const veth = await lbVeth();
    expect((await nodeFastPath.sync(["eth0"], [`${VIP}/32`], [{ ip: LB, ifindex: veth }])).skipped).toEqual(
      [],
    );
    const lbEth0 = Number(await lb.run("cat", ["/sys/class/net/eth0/ifindex"]));
    const nodeEth0 = Number(await lbNode.run("cat", ["/sys/class/net/eth0/ifindex"]));
    expect(await tcIngress(lb, lbEth0)).toEqual(["dsr_lb"]);
    expect(await tcIngress(lbNode, nodeEth0)).toEqual(["to_lb_pod"]);
    expect(await tcIngress(lbNode, veth)).toEqual(["from_lb_pod"]);
    // No tcx link holds them.
    const links = await bpftool<{ prog_id: number }[]>("link", "show");
    expect(links.filter((l) => [fastPath!.programId, nodeFastPath!.programId].includes(l.prog_id))).toEqual(
      [],
    );

    const before = {
      lb: await fastPath.stats(),
      node: await nodeFastPath.stats(),
      nft: await nodeForwarded(),
    };
    expect(await answered(40)).toEqual({ "10.0.0.2": 40 });
    expect((await fastPath.stats()).forwarded - before.lb.forwarded).toBeGreaterThanOrEqual(40 * 3);
    expect((await nodeFastPath.stats()).to_pod! - before.node.to_pod!).toBeGreaterThanOrEqual(40 * 3);
    expect(await nodeForwarded()).toBe(before.nft);

    // Someone deletes the pod's filter: the kernel path carries the flows until check puts it back.
    await lb.run("tc", ["filter", "del", "dev", "eth0", "ingress", "pref", "65000"]);
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fastPath.check()).drift.join("\n")).toMatch(
      /not attached to eth0 tc ingress: attached again/,
    );
    expect(await tcIngress(lb, lbEth0)).toEqual(["dsr_lb"]);
    const repaired = await fastPath.stats();
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    expect((await fastPath.stats()).forwarded).toBeGreaterThan(repaired.forwarded);

    // Gone with their loaders: filters and the clsact qdiscs they added, and the kernel path serves.
    await fastPath.close();
    await nodeFastPath.close();
    fastPath = nodeFastPath = undefined;
    expect([
      await tcIngress(lb, lbEth0),
      await tcIngress(lbNode, nodeEth0),
      await tcIngress(lbNode, veth),
    ]).toEqual([[], [], []]);
    expect([await hasClsact(lb, "eth0"), await hasClsact(lbNode, "eth0")]).toEqual([false, false]);
    expect(await answered(10)).toEqual({ "10.0.0.2": 10 });
    await lbNode.run("nft", ["delete", "table", "inet", "plbtest"]);
  });

  it("says why when it cannot start", async () => {
    await expect(
      FastPath.start({ binary: BINARY, device: "nosuchdev", prefix: ["ip", "netns", "exec", lb.netns] }),
    ).rejects.toThrow(/fast path loader: .*nosuchdev/);
  });
});
