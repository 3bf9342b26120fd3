// The backend side of direct server return, in network namespaces: a "node" with two "pods" on its
// bridge, the applier run against them as the node agent runs it (its two capabilities, the node's
// namespace, pod namespaces found in a runtime-like netns directory), and the packet path proven
// end to end: a client's request to the VIP goes through an LB namespace programmed by the LB's
// nftables engine (which encapsulates it to the pod), and the pod's answer goes from the VIP
// straight to the client through the node. The node is strict about reverse paths and drops
// conntrack-INVALID packets in FORWARD (as kube-proxy does); the pods inherit a strict rp_filter too.
//
//   client (10.30.0.2) ─ router ─ lb (10.31.0.2, VIPs routed here)
//                          └──── node (10.32.0.2) ══ cni0 10.244.1.1/24 ══ pod-a .5, pod-b .6
import { CoordinationV1Api, CoreV1Api, NetworkingV1Api, type KubeConfig } from "@kubernetes/client-node";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { Registry } from "prom-client";
import {
  DSR_BACKEND_IPIP_DEVICE,
  DSR_BACKEND_MAC,
  DSR_BACKEND_DEVICE,
  DSR_UDP_PORT,
} from "../../lb-image/src/dataplane/dsr/dsrTunnel.ts";
import type { VirtualService } from "../../lb-image/src/dataplane/model.ts";
import { IPIP_PROBE_DEVICE, type DsrReport } from "../../lb-image/src/nodeAgent/dsr/dsrApplier.ts";
import { DSR_NODE_TABLE, parseNodeTable } from "../../lb-image/src/nodeAgent/dsr/nodeDsrTable.ts";
import { LO_LABEL } from "../../lb-image/src/nodeAgent/dsr/podDsrState.ts";
import { DECAP_PREF, DECAP_PROGRAM } from "../../lb-image/src/nodeAgent/dsr/podDecap.ts";
import { IPIP_DECAP_LABEL, ipipDecapLeaseName } from "../../lb-image/src/common/ipipDecap.ts";
import { lbConfigSchema, type LbConfig } from "@portable-lb/core/config";
import { startNodeAgent } from "../../lb-image/src/nodeAgent/nodeAgent.ts";
import { NftEngine } from "../../lb-image/src/dataplane/nft/nftEngine.ts";
import { statusWriter } from "../../lb-image/src/controller/statusWriter.ts";
import { describeEvents } from "../harness/describeEvents.ts";
import { createLbService } from "../harness/lbServices.ts";
import { DsrBackendNode, KUBE_PROXY_LIKE } from "../harness/netns/dsrBackendNode.ts";
import { builtFastPath } from "../harness/fastPathBuild.ts";
import * as netpol from "../harness/networkPolicies.ts";
import { ruleCounters } from "../harness/netns/nftCounters.ts";
import { getInside, startHttpEcho } from "../harness/netns/httpClient.ts";
import { settle } from "../harness/settle.ts";
import { testKubeConfig } from "../harness/testEnv.ts";
import { NetnsLab, type LabNamespace } from "@portable-lb/lab";

const NODE = "n1";
const VIP = "10.1.1.10";
const VIP2 = "10.1.1.11";
const POD_A = "10.244.1.5";
const POD_B = "10.244.1.6";
const NODE_IP = "10.32.0.2";
const CLIENT_IP = "10.30.0.2";
const POD_MTU = 1450;
const CLAMPED_MSS = POD_MTU - 50 - 40;

let lab: NetnsLab;
let client: LabNamespace;
let lb: LabNamespace;
let node: LabNamespace;
let podA: LabNamespace;
let podB: LabNamespace;
/** The node's side: its netns directory (the pods' namespaces and a stray file), its applier. */
let backendNode: DsrBackendNode | undefined;
/** The tc BPF decapsulation object, compiled for this run, and its folder. */
let decapObject: string;
const log = pino({ level: "warn" });

const svc = (vip: string, backends: string[]): VirtualService => ({
  vip,
  port: 8080,
  protocol: "tcp",
  scheduler: "mh",
  forwarding: "dsr",
  backends: backends.map((ip) => ({ ip, port: 8080, weight: 1, nodeName: NODE })),
});

const applier = (registry?: Registry) => backendNode!.applier(registry);
/** The real node agent on the test's node, its DSR half reading the test's netns directory. */
/** The LB's config with DSR, as the node agent runs with it here. */
const dsrConfig = () =>
  lbConfigSchema.parse({
    loadBalancerClass: "portable-lb.io/dsrbackend",
    routingMode: "bgp",
    podCidr: "10.244.0.0/16",
    vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
    dataPlane: { mode: "dsr" },
    bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
  });

const startAgent = (config: LbConfig, kubeconfig: KubeConfig, namespace: string) =>
  startNodeAgent({
    config,
    kubeconfig,
    log,
    nodeName: NODE,
    namespace,
    commandPrefix: backendNode!.agentPrefix(),
    httpPort: 0,
    httpHost: "127.0.0.1",
    dsr: { netnsDir: backendNode!.netnsDir, procSysNet: "/proc/sys/net", resyncMs: 500 },
  });

/** What the LB's observation table counted: packets it encapsulated, and replies from a VIP (DSR: none). */
async function lbCounters(): Promise<{ encapsulated: number; replies: number }> {
  const [encapsulated = -1, replies = -1] = await ruleCounters(lb, "observe");
  return { encapsulated, replies };
}

/** One GET from the client to VIP:8080, within 2 s; the echo's JSON, or the error. */
async function ask(vip = VIP): Promise<{ backend?: string; client?: string; error?: string }> {
  try {
    return JSON.parse((await getInside(client, 8080, "/", { host: vip, timeoutMs: 2_000 })).body) as {
      backend: string;
      client: string;
    };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

async function podState(ns: LabNamespace) {
  const links = JSON.parse(await ns.ip("-j", "-d", "addr", "show")) as {
    ifname: string;
    ifindex: number;
    mtu: number;
    address: string;
    addr_info: { local: string; label?: string }[];
  }[];
  const dev = links.find((l) => l.ifname === DSR_BACKEND_DEVICE);
  const lo = links.find((l) => l.ifname === "lo")!;
  return {
    device: dev && { mtu: dev.mtu, mac: dev.address, ifindex: dev.ifindex },
    vips: lo.addr_info.filter((a) => a.label === LO_LABEL).map((a) => a.local),
    rpFilterAll: await ns.sysctl("net.ipv4.conf.all.rp_filter"),
  };
}

async function nodeTable() {
  const r = await node.exec("nft", ["-j", "list", "table", "ip", DSR_NODE_TABLE]);
  return r.code === 0 ? parseNodeTable(r.stdout) : undefined;
}

const expectClean = (r: DsrReport) => expect(r.failures).toEqual([]);

/** The pod's eth0 ingress: whether it has a clsact qdisc, and our filter's program tag. */
async function decapState(ns: LabNamespace): Promise<{ clsact: boolean; tag: string | undefined }> {
  const qdiscs = JSON.parse(await ns.run("tc", ["-j", "qdisc", "show", "dev", "eth0"])) as { kind: string }[];
  const filters = JSON.parse(
    (await ns.exec("tc", ["-j", "filter", "show", "dev", "eth0", "ingress"])).stdout || "[]",
  ) as { pref: number; options?: { prog?: { name?: string; tag?: string } } }[];
  const ours = filters.find((f) => f.pref === DECAP_PREF && f.options?.prog?.name === DECAP_PROGRAM);
  return { clsact: qdiscs.some((q) => q.kind === "clsact"), tag: ours?.options?.prog?.tag };
}

/** Packets the pod's VXLAN device has received (decapsulated). */
async function deviceRx(ns: LabNamespace): Promise<number> {
  const [link] = JSON.parse(await ns.ip("-s", "-j", "link", "show", DSR_BACKEND_DEVICE)) as {
    stats64: { rx: { packets: number } };
  }[];
  return link!.stats64.rx.packets;
}

beforeAll(async () => {
  lab = await NetnsLab.create("dsrbackend");
  const router = await lab.namespace("router", { forwarding: true });
  client = await lab.namespace("client");
  lb = await lab.namespace("lb", { forwarding: true });
  node = await lab.namespace("node", { forwarding: true });
  await lab.link(client, router, { a: `${CLIENT_IP}/24`, b: "10.30.0.1/24" });
  await lab.link(lb, router, { a: "10.31.0.2/24", b: "10.31.0.1/24" });
  await lab.link(node, router, { a: `${NODE_IP}/24`, b: "10.32.0.1/24" });
  await client.defaultRoute("10.30.0.1");
  await lb.defaultRoute("10.31.0.1");
  await node.defaultRoute("10.32.0.1");
  // The upstream router: VIPs to the LB, the pod network to the node.
  for (const vip of [VIP, VIP2]) await router.route(`${vip}/32`, "10.31.0.2");
  await router.route("10.244.1.0/24", NODE_IP);
  const bridge = await lab.bridge(node, "cni0", "10.244.1.1/24");
  for (const [ns, ip] of [
    [(podA = await lab.namespace("pod-a")), POD_A],
    [(podB = await lab.namespace("pod-b")), POD_B],
  ] as const) {
    await lab.attach(bridge, ns, `${ip}/24`, "eth0");
    await ns.ip("link", "set", "eth0", "mtu", String(POD_MTU));
    await ns.defaultRoute("10.244.1.1");
    // Pods inherit the host's rp_filter; strict here, whatever the host has.
    await ns.sysctl("net.ipv4.conf.all.rp_filter", "1");
    await startHttpEcho(ns, { port: 8080, name: ns.name });
  }
  // The client counts the SYN-ACKs it gets, and those whose MSS leaves room for the tunnel.
  await client.run("nft", ["-f", "-"], {
    input: [
      "table ip observe {",
      "  chain in { type filter hook input priority filter; policy accept;",
      "    tcp flags & (syn | ack) == syn | ack counter",
      `    tcp flags & (syn | ack) == syn | ack tcp option maxseg size ${CLAMPED_MSS} counter`,
      "  }",
      "}",
    ].join("\n"),
  });
  // The LB, programmed as the controller does: its VIPs local, one Maglev table per service. It
  // serves both VIPs throughout; whether a pod answers is up to the node agent. It counts the
  // tunnel packets it sends, and replies from a VIP that reach it (DSR: none).
  for (const vip of [VIP, VIP2]) await lb.localRoute(`${vip}/32`);
  await lb.run("nft", ["-f", "-"], {
    input: [
      "table ip observe {",
      "  chain out { type filter hook output priority filter; policy accept;",
      `    udp dport ${DSR_UDP_PORT} counter`,
      "  }",
      "  chain pre { type filter hook prerouting priority raw; policy accept;",
      `    ip saddr { ${VIP}, ${VIP2} } counter`,
      "  }",
      "}",
    ].join("\n"),
  });
  const prefix = ["ip", "netns", "exec", lb.netns] as const;
  await new NftEngine([...prefix, "nft"], [...prefix, "ip"]).apply([
    svc(VIP, [POD_A]),
    svc(VIP2, [POD_A, POD_B]),
  ]);
  // The node as many distributions ship it (strict reverse-path filter), with kube-proxy's drop,
  // and the runtime's netns directory, with a file that is no namespace at all.
  // The LB's namespace is in it too, as an LB pod on a node with backends is: its own VXLAN device
  // must never be taken for a backend's.
  backendNode = await DsrBackendNode.create(node, [podA, podB, lb], ["cni0"]);
  writeFileSync(join(backendNode.netnsDir, "not-a-namespace"), "");
  decapObject = builtFastPath().decapObject;
});

afterAll(async () => {
  backendNode?.destroy();
  await lab?.destroy();
});

describe("DSR backend side in network namespaces", () => {
  it("prepares the pod and the node, and the client gets its answer from the VIP directly", async () => {
    // Nothing prepared: the encapsulated request is dropped in the pod.
    expect((await ask()).error).toBeDefined();
    const report = await applier().apply([svc(VIP, [POD_A])], NODE);
    expectClean(report);
    expect(report).toMatchObject({ pods: 1, vips: [VIP], hostNetwork: [] });
    expect(await podState(podA)).toMatchObject({
      device: { mtu: POD_MTU - 50, mac: DSR_BACKEND_MAC },
      vips: [VIP],
      rpFilterAll: "0",
    });
    expect(await podA.sysctl(`net.ipv4.conf.${DSR_BACKEND_DEVICE}.rp_filter`)).toBe("0");
    // The other pod serves no DSR VIP: untouched.
    expect(await podState(podB)).toEqual({ device: undefined, vips: [], rpFilterAll: "1" });
    expect(await nodeTable()).toEqual({ vips: [VIP], mss: CLAMPED_MSS });
    expect(await node.sysctl("net.ipv4.conf.all.rp_filter")).toBe("2");
    expect(await node.sysctl("net.ipv4.conf.cni0.rp_filter")).toBe("2");

    for (let i = 0; i < 10; i++) expect(await ask()).toMatchObject({ backend: VIP, client: CLIENT_IP });
    const { encapsulated, replies } = await lbCounters();
    expect(encapsulated).toBeGreaterThan(0);
    expect(replies).toBe(0);
    const [synAcks, clamped] = await ruleCounters(client, "observe");
    expect(synAcks).toBe(10);
    expect(clamped).toBe(10);
    // Applied again: nothing to change.
    expect((await applier().apply([svc(VIP, [POD_A])], NODE)).changes).toBe(0);
  });

  it("on a kernel without ipip (this machine's), keeps VXLAN and says so once, for IPVS-engine LBs", async () => {
    const lines: string[] = [];
    const registry = new Registry();
    const agent = backendNode!.applier(registry, {
      ipip: true,
      log: pino({ level: "warn" }, { write: (line: string) => void lines.push(line) }),
    });
    const report = await agent.apply([svc(VIP, [POD_A])], NODE);
    expectClean(report);
    expect(report.pods).toBe(1);
    expect(await podState(podA)).toMatchObject({ device: { mtu: POD_MTU - 50 }, vips: [VIP] });
    expect((await podA.exec("ip", ["link", "show", DSR_BACKEND_IPIP_DEVICE])).code).not.toBe(0);
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_ipip")).toMatch(/ 0$/);
    // Learnt once: the next run neither tries again nor says it again, and the VIP still answers.
    const again = await agent.apply([svc(VIP, [POD_A])], NODE);
    expect(again.changes).toBe(0);
    // What the node agent tells the LB pods (its Lease), from that same attempt.
    expect(await agent.ipipDecap()).toBe(false);
    expect(lines.filter((l) => l.includes("the kernel has no ipip"))).toHaveLength(1);
    expect(await ask()).toMatchObject({ backend: VIP, client: CLIENT_IP });
  });

  it("learns whether the kernel has ipip on the node itself, before any pod needs it", async () => {
    const lines: string[] = [];
    const agent = backendNode!.applier(new Registry(), {
      ipip: true,
      log: pino({ level: "warn" }, { write: (line: string) => void lines.push(line) }),
    });
    // This machine's kernel has none; the probe device is not left behind either way.
    expect(await agent.ipipDecap()).toBe(false);
    expect(await agent.ipipDecap()).toBe(false);
    expect(lines.filter((l) => l.includes("the kernel has no ipip"))).toHaveLength(1);
    expect((await backendNode!.node.exec("ip", ["link", "show", IPIP_PROBE_DEVICE])).code).not.toBe(0);
  });

  it("repairs drift: the VIP off lo, the node's table deleted, rp_filter made strict again", async () => {
    const agent = applier();
    await agent.apply([svc(VIP, [POD_A])], NODE);
    await podA.ip("addr", "del", `${VIP}/32`, "dev", "lo");
    expect((await ask()).error).toBeDefined();
    expect((await agent.apply([svc(VIP, [POD_A])], NODE)).changes).toBe(1);
    expect(await ask()).toMatchObject({ backend: VIP });
    // Without notrack the node's conntrack sees a SYN-ACK it never saw the SYN of: INVALID, dropped.
    await node.run("nft", ["delete", "table", "ip", DSR_NODE_TABLE]);
    expect((await ask()).error).toBeDefined();
    const [invalidDrops = 0] = await ruleCounters(node, KUBE_PROXY_LIKE);
    expect(invalidDrops).toBeGreaterThan(0);
    expect((await agent.apply([svc(VIP, [POD_A])], NODE)).changes).toBe(1);
    expect(await ask()).toMatchObject({ backend: VIP });
    // Strict reverse-path checks, in the pod (the request arrives on the tunnel device, the route
    // back is eth0) and on the node (the reply's source, the VIP, is routed elsewhere), drop it.
    // (The effective value is max(all, device): the node's cni0 is made strict too.)
    for (const [ns, devices] of [
      [podA, ["all"]],
      [node, ["all", "cni0"]],
    ] as const) {
      for (const dev of devices) await ns.sysctl(`net.ipv4.conf.${dev}.rp_filter`, "1");
      expect((await ask()).error).toBeDefined();
      expect((await agent.apply([svc(VIP, [POD_A])], NODE)).changes).toBe(devices.length);
      expect(await ask()).toMatchObject({ backend: VIP });
    }
  });

  it("adopts what it finds after a restart, without churn, leaving an LB pod's tunnels alone", async () => {
    const before = await podState(podA);
    const lbTunnels = async () => [await lb.ip("-d", "link", "show", "type", "vxlan"), await lb.ip("rule")];
    const lbBefore = await lbTunnels();
    expect(lbBefore[0]).toContain("plb-dsr");
    const registry = new Registry();
    const report = await applier(registry).apply([svc(VIP, [POD_A])], NODE);
    expectClean(report);
    expect(report.changes).toBe(0);
    expect(await podState(podA)).toEqual(before);
    expect(await lbTunnels()).toEqual(lbBefore);
    expect(await ask()).toMatchObject({ backend: VIP });
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_backend_pods")).toMatch(/ 1$/);
  });

  it("with the BPF object, decapsulates in tc on each pod's eth0, not on the device; repairs, adopts, removes", async () => {
    const registry = new Registry();
    const agent = backendNode!.applier(registry, { decapObject });
    const services = [svc(VIP, [POD_A]), svc(VIP2, [POD_A, POD_B])];
    const report = await agent.apply(services, NODE);
    expectClean(report);
    expect(report.pods).toBe(2);
    const a = await decapState(podA);
    expect(a).toEqual({ clsact: true, tag: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(await decapState(podB)).toEqual(a);
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_bpf_decap")).toMatch(/ 1$/);
    // Answered from the VIP, and the VXLAN devices received none of it: the program decapsulated.
    const rx = async () => [await deviceRx(podA), await deviceRx(podB)];
    const before = await rx();
    for (let i = 0; i < 10; i++) expect(await ask()).toMatchObject({ backend: VIP, client: CLIENT_IP });
    for (let i = 0; i < 10; i++) expect(await ask(VIP2)).toMatchObject({ backend: VIP2, client: CLIENT_IP });
    expect(await rx()).toEqual(before);
    const [synAcks, clamped] = await ruleCounters(client, "observe");
    expect(clamped).toBe(synAcks);
    // Drift: the filter deleted, the device decapsulates again (the fast path is only an
    // accelerator); the next run attaches it again, and the device is idle again.
    await podA.run("tc", ["filter", "del", "dev", "eth0", "ingress", "pref", String(DECAP_PREF)]);
    expect(await ask()).toMatchObject({ backend: VIP });
    const [viaDevice] = await rx();
    expect(viaDevice).toBeGreaterThan(before[0]!);
    expect((await agent.apply(services, NODE)).changes).toBe(1);
    expect(await decapState(podA)).toEqual(a);
    expect(await ask()).toMatchObject({ backend: VIP });
    expect((await rx())[0]).toBe(viaDevice);
    // A restarted agent adopts it all: nothing to change.
    expect((await backendNode!.applier(new Registry(), { decapObject }).apply(services, NODE)).changes).toBe(
      0,
    );
    // Pod B leaves: its filter goes, and the clsact qdisc this agent added; then pod A's.
    expectClean(await agent.apply([svc(VIP, [POD_A])], NODE));
    expect(await decapState(podB)).toEqual({ clsact: false, tag: undefined });
    expect(await decapState(podA)).toEqual(a);
    expectClean(await agent.apply([], NODE));
    expect(await decapState(podA)).toEqual({ clsact: false, tag: undefined });
    expect(await podState(podA)).toEqual({ device: undefined, vips: [], rpFilterAll: "1" });
  });

  it("where the kernel will not load the object, says so once and decapsulates on the device", async () => {
    const lines: string[] = [];
    const registry = new Registry();
    const agent = backendNode!.applier(registry, {
      decapObject: join(lab.dir, "missing.o"),
      log: pino({ level: "warn" }, { write: (line: string) => void lines.push(line) }),
    });
    for (let i = 0; i < 2; i++) expectClean(await agent.apply([svc(VIP, [POD_A])], NODE));
    expect(lines.filter((l) => l.includes("did not load the DSR decapsulation program"))).toHaveLength(1);
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_bpf_decap")).toMatch(/ 0$/);
    expect(await decapState(podA)).toEqual({ clsact: false, tag: undefined });
    const before = await deviceRx(podA);
    expect(await ask()).toMatchObject({ backend: VIP, client: CLIENT_IP });
    expect(await deviceRx(podA)).toBeGreaterThan(before);
  });

  it("serves several pods and VIPs, reports host-network and missing pods, and goes on", async () => {
    const registry = new Registry();
    const report = await applier(registry).apply(
      [svc(VIP, [POD_A, NODE_IP]), svc(VIP2, [POD_A, POD_B, "10.244.1.99"])],
      NODE,
    );
    expect(report.hostNetwork).toEqual([{ ip: NODE_IP, vips: [VIP] }]);
    expect(report.failures).toEqual([
      expect.objectContaining({ podIp: "10.244.1.99", error: expect.stringMatching(/no network namespace/) }),
    ]);
    expect(report).toMatchObject({ pods: 2, vips: [VIP, VIP2] });
    expect((await podState(podA)).vips).toEqual([VIP, VIP2]);
    expect((await podState(podB)).vips).toEqual([VIP2]);
    expect(await nodeTable()).toEqual({ vips: [VIP, VIP2], mss: CLAMPED_MSS });
    // The node itself is never prepared.
    expect(JSON.parse(await node.ip("-j", "link", "show"))).not.toContainEqual(
      expect.objectContaining({ ifname: DSR_BACKEND_DEVICE }),
    );
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_host_network_backends")).toMatch(/ 1$/);
    expect(await registry.getSingleMetricAsString("portable_lb_dsr_pod_errors_total")).toMatch(/ 1$/);
    expect(await ask(VIP2)).toMatchObject({ backend: VIP2, client: CLIENT_IP });
  });

  it("undoes it all when pods and Services go: VIPs, devices, pod rp_filter, the node's table", async () => {
    const agent = applier();
    // VIP leaves pod A's services: only its address goes.
    expectClean(await agent.apply([svc(VIP2, [POD_A, POD_B])], NODE));
    expect((await podState(podA)).vips).toEqual([VIP2]);
    expect(await nodeTable()).toEqual({ vips: [VIP2], mss: CLAMPED_MSS });
    // Pod A serves nothing any more: its device goes and its rp_filter is what it was.
    expectClean(await agent.apply([svc(VIP2, [POD_B])], NODE));
    expect(await podState(podA)).toEqual({ device: undefined, vips: [], rpFilterAll: "1" });
    expect((await podState(podB)).device).toBeDefined();
    // No DSR VIP left: no table; a restarted agent cleans up what it finds too.
    expectClean(await applier().apply([], NODE));
    expect(await podState(podB)).toEqual({ device: undefined, vips: [], rpFilterAll: "1" });
    expect(await nodeTable()).toBeUndefined();
    expect((await ask(VIP2)).error).toBeDefined();
    // A DSR VIP without a backend here (as on an LB's node): untracked, nothing clamped; adopted.
    expect((await applier().apply([svc(VIP2, [])], NODE)).changes).toBe(1);
    expect(await nodeTable()).toEqual({ vips: [VIP2] });
    expect((await applier().apply([svc(VIP2, [])], NODE)).changes).toBe(0);
    expectClean(await applier().apply([], NODE));
    expect(await nodeTable()).toBeUndefined();
  });

  it("is run by the node agent: state left for a Service that is gone is removed", async () => {
    expectClean(await applier().apply([svc(VIP, [POD_A])], NODE));
    expect((await podState(podA)).vips).toEqual([VIP]);
    // The run's API server holds no DSR Service with a backend on this node.
    const agent = await startNodeAgent({
      config: lbConfigSchema.parse({
        routingMode: "bgp",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
      }),
      kubeconfig: testKubeConfig(),
      log,
      nodeName: NODE,
      namespace: `dsrbackend-${process.pid}`,
      commandPrefix: backendNode!.agentPrefix(),
      httpPort: 0,
      httpHost: "127.0.0.1",
      dsr: { netnsDir: backendNode!.netnsDir, procSysNet: "/proc/sys/net", resyncMs: 500 },
    });
    try {
      await settle(async () => (await podState(podA)).device === undefined);
      expect(await podState(podA)).toEqual({ device: undefined, vips: [], rpFilterAll: "1" });
      expect(await nodeTable()).toBeUndefined();
      expect(await agent.registry.getSingleMetricAsString("portable_lb_dsr_vips")).toMatch(/ 0$/);
    } finally {
      await agent.stop();
    }
  });

  it("is run by the node agent: follows NetworkPolicies as the controller does, tells host-network backends", async () => {
    const ns = `dsrbackend-np-${process.pid}`;
    const lbNs = `dsrbackend-${process.pid}`;
    const config = dsrConfig();
    const kc = testKubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const networking = kc.makeApiClient(NetworkingV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    const agent = await (async () => {
      // A DSR Service (port = targetPort) with a pod backend and a host-network one on this node,
      // its VIP in status (as the controller writes it), and a policy admitting the LB pods' tunnel.
      const backends = [POD_A, NODE_IP].map((ip) => ({ ip, nodeName: NODE }));
      await createLbService(kc, ns, "web", config.loadBalancerClass, backends, {
        port: 8080,
        selector: { app: "web" },
      });
      const created = await core.readNamespacedService({ name: "web", namespace: ns });
      await statusWriter(core)(created, [VIP]);
      await networking.createNamespacedNetworkPolicy({
        namespace: ns,
        body: netpol.tunnelPolicy(ns, [netpol.lbPodsPeer(lbNs)]),
      });
      return startAgent(config, kc, lbNs);
    })();
    try {
      await settle(async () => JSON.stringify((await podState(podA)).vips) === JSON.stringify([VIP]));
      const svc = await core.readNamespacedService({ name: "web", namespace: ns });
      await settle(async () =>
        (await describeEvents(core, "Service", svc)).some(
          (e) =>
            e.reason === "DirectServerReturnHostNetworkBackend" &&
            e.type === "Warning" &&
            e.message?.startsWith(`backend ${NODE_IP} on node ${NODE} is on the host network`),
        ),
      );
      // The policy no longer admits the LB pods (changed, through the watch): the port is SNAT's.
      await netpol.replaceTunnelPolicy(networking, ns, [netpol.namespacePeer("elsewhere")]);
      await settle(async () => (await podState(podA)).vips.length === 0);
      // No policy restricts the backends: DSR again.
      await networking.deleteNamespacedNetworkPolicy({ name: netpol.POLICY_NAME, namespace: ns });
      await settle(async () => JSON.stringify((await podState(podA)).vips) === JSON.stringify([VIP]));
    } finally {
      await agent.stop();
      await core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
  });

  it("is run by the node agent: prepares a backend pod before it is ready, so its first flow finds the VIP", async () => {
    const ns = `dsrbackend-starting-${process.pid}`;
    const lbNs = `dsrbackend-${process.pid}`;
    const config = dsrConfig();
    // From a pod with nothing of DSR on it (the tests before leave it prepared).
    expectClean(await applier().apply([], NODE));
    expect((await podState(podA)).vips).toEqual([]);
    const kc = testKubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    // The Service's one endpoint is not ready yet: the LB pods send it nothing, and announce nothing.
    await createLbService(
      kc,
      ns,
      "web",
      config.loadBalancerClass,
      [{ ip: POD_A, nodeName: NODE, ready: false }],
      {
        port: 8080,
      },
    );
    await statusWriter(core)(await core.readNamespacedService({ name: "web", namespace: ns }), [VIP]);
    const agent = await startAgent(config, kc, lbNs);
    try {
      await settle(async () => JSON.stringify((await podState(podA)).vips) === JSON.stringify([VIP]));
      expect((await podState(podA)).device).toBeDefined();
    } finally {
      await agent.stop();
      await core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
  });

  it("with IPVS-engine LBs on this kernel (no ipip): says so in its Lease and serves the port by SNAT, as they do", async () => {
    const ns = `dsrbackend-ipip-${process.pid}`;
    const lbNs = `dsrbackend-ipip-lb-${process.pid}`;
    const config = (engine: "nftables" | "ipvs") =>
      lbConfigSchema.parse({
        loadBalancerClass: "portable-lb.io/dsrbackend-ipip",
        routingMode: "bgp",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        dataPlane: { mode: "dsr", engine },
        bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
      });
    const kc = testKubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const coordination = kc.makeApiClient(CoordinationV1Api);
    const lease = () =>
      coordination
        .readNamespacedLease({ name: ipipDecapLeaseName(NODE), namespace: lbNs })
        .catch(() => undefined);
    const start = (engine: "nftables" | "ipvs") => startAgent(config(engine), kc, lbNs);
    for (const name of [ns, lbNs]) await core.createNamespace({ body: { metadata: { name } } });
    await createLbService(kc, ns, "web", config("ipvs").loadBalancerClass, [{ ip: POD_A, nodeName: NODE }], {
      port: 8080,
    });
    await statusWriter(core)(await core.readNamespacedService({ name: "web", namespace: ns }), [VIP]);
    let agent = await start("nftables");
    try {
      // VXLAN LBs: the port is DSR's, pod A holds the VIP, and no Lease is written.
      await settle(async () => JSON.stringify((await podState(podA)).vips) === JSON.stringify([VIP]));
      expect(await lease()).toBeUndefined();
      await agent.stop();
      // IPVS LBs tunnel in IPIP, which this kernel cannot decapsulate: the agent says so, and takes
      // the port off DSR as the controllers do (the same desiredState, the same Lease).
      agent = await start("ipvs");
      await settle(async () => (await lease())?.metadata?.labels?.[IPIP_DECAP_LABEL] === "false");
      expect((await lease())?.spec?.holderIdentity).toBe(NODE);
      await settle(async () => (await podState(podA)).vips.length === 0);
      // A Lease changed by hand is put back.
      const changed = (await lease())!;
      changed.metadata!.labels![IPIP_DECAP_LABEL] = "true";
      await coordination.replaceNamespacedLease({
        name: changed.metadata!.name!,
        namespace: lbNs,
        body: changed,
      });
      await settle(async () => (await lease())?.metadata?.labels?.[IPIP_DECAP_LABEL] === "false");
      await settle(async () => (await podState(podA)).vips.length === 0);
    } finally {
      await agent.stop();
      for (const name of [ns, lbNs]) await core.deleteNamespace({ name }).catch(() => undefined);
    }
  });
});
