// The LB pod's DSR fast path (lb-image/fastpath) over the nftables engine's kernel path: the loader
// runs in the LB pod's namespace with CAP_NET_ADMIN and CAP_BPF only, as the controller runs it.
// Every TCP and UDP flow reaches the backend the kernel path alone gives it (the Maglev table and
// the hash are nft's, bit for bit), the backends see the client's address, keep-alive connections
// keep their backend when one is added (also those the kernel path began before the fast path
// started), `check` repairs a deleted map entry and a detached program, and when the loader's
// stdin closes its program goes and the kernel path carries on.
//
//   client ── router ══ fabric ══ node ══ cni0 ══ p1, p2, p3   (backends, prepared by the node agent)
//                              ╚═ lbnode ══ cni0 ══ lb          (NftEngine in DSR mode + fast path)
import { join } from "node:path";
import { NetnsLab, waitUntil, type LabNamespace } from "@portable-lb/lab";
import { FastPath } from "../../lb-image/src/dataplane/fastpath/fastPath.ts";
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

function startFastPath(): Promise<FastPath> {
  return FastPath.start({
    binary: BINARY,
    device: "eth0",
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
  const lbNode = await lab.namespace("lbnode", { forwarding: true });
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

afterAll(async () => {
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

  it("repairs a deleted map entry and a detached program on check", async () => {
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

  it("says why when it cannot start", async () => {
    await expect(
      FastPath.start({ binary: BINARY, device: "nosuchdev", prefix: ["ip", "netns", "exec", lb.netns] }),
    ).rejects.toThrow(/fast path loader: .*nosuchdev/);
  });
});
