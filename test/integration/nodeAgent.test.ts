// The node agent end to end: the run's kube-apiserver holds LB Pods bound to a node; the real agent
// programs the node namespace's routes; a client sends VIP traffic to the node (as the upstream
// router would, the node being the BGP next hop) and it must arrive at the node's ready LB pod.
import { AppsV1Api, CoreV1Api, type V1PodSpec, type V1Pod } from "@kubernetes/client-node";
import { LB_APP_LABEL, METADATA_GUARD, lbConfigSchema } from "@portable-lb/core/config";
import { metadataGuardRules } from "@portable-lb/providers";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { nodeAgentPodSpec } from "../../packages/core/src/loadBalancer/nodeAgent.ts";
import { NODE_ROUTE_PROTO } from "../../lb-image/src/nodeAgent/nodeRoutes.ts";
import { BFD_MULTIHOP_PORT, STEERING_TABLE } from "../../lb-image/src/nodeAgent/podSteering.ts";
import { parseAccessSet } from "../../lb-image/src/nodeAgent/metadataAccess.ts";
import { startNodeAgent, type RunningNodeAgent } from "../../lb-image/src/nodeAgent/nodeAgent.ts";
import { gatewayLab, spreadOver } from "../harness/netns/gatewayLab.ts";
import type { LabNamespace, NetnsLab } from "@portable-lb/lab";
import { settle } from "../harness/settle.ts";
import { TcpProxy } from "../harness/tcpProxy.ts";
import { testKubeConfig } from "../harness/testEnv.ts";

const NS = `nodeagent-${process.pid}`;
const NODE = `${NS}-n1`;
const OTHER_NODE = `${NS}-n2`;
const VIP = "10.1.1.10";
const config = lbConfigSchema.parse({
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const LB_PODS = [
  { name: "lb-1", ip: "10.244.1.10", node: NODE },
  { name: "lb-2", ip: "10.244.1.11", node: NODE },
  // Same IP as lb-1's neighbour on another node: must never appear in this node's routes.
  { name: "lb-3", ip: "10.244.2.10", node: OTHER_NODE },
];

const adminKc = testKubeConfig();
const core = adminKc.makeApiClient(CoreV1Api);

let lab: NetnsLab;
let client: LabNamespace;
let node: LabNamespace;
let podNamespaces: Map<string, LabNamespace>;
let proxy: TcpProxy;
let agent: RunningNodeAgent | undefined;

function start(resyncMs = 500, agentConfig = config): Promise<RunningNodeAgent> {
  return startNodeAgent({
    config: agentConfig,
    kubeconfig: testKubeConfig(`https://127.0.0.1:${proxy.port}`),
    log: pino({ level: "warn" }),
    nodeName: NODE,
    namespace: NS,
    commandPrefix: ["ip", "netns", "exec", node.netns],
    httpPort: 0,
    httpHost: "127.0.0.1",
    resyncMs,
  });
}

async function readyz(): Promise<number> {
  const { port } = agent!.server.address() as AddressInfo;
  return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
}

/** The node's routes of our protocol, as "prefix>hop,hop". */
async function ourRoutes(): Promise<string[]> {
  return (await agent!.routes.current()).map((r) => `${r.prefix}>${r.via.join(",")}`);
}

async function setReady(name: string, ready: boolean): Promise<void> {
  const pod = await core.readNamespacedPodStatus({ name, namespace: NS });
  const p = LB_PODS.find((x) => x.name === name)!;
  pod.status = {
    phase: "Running",
    podIP: p.ip,
    podIPs: [{ ip: p.ip }],
    conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
  };
  await core.replaceNamespacedPodStatus({ name, namespace: NS, body: pod });
}

/** What the agent tells the LB pod at `podIp` about itself (its node-route check asks this). */
async function lbPodAnswer(podIp: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const { port } = agent!.server.address() as AddressInfo;
  const res = await fetch(`http://127.0.0.1:${port}/lb-pods/${podIp}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Which LB pod answers 40 fresh connections from the client to the VIP. */
const answering = () => spreadOver(client, `http://${VIP}:8080/`, 40);

beforeAll(async () => {
  // The node is the gateway; its bridge is the pod bridge (cni0) with the LB pods on it, each of
  // which accepts the VIP locally (what the LB controller does) and answers with its name.
  ({
    lab,
    client,
    gateway: node,
    hosts: podNamespaces,
  } = await gatewayLab("nodeagent", {
    gateway: "node",
    clientNet: "10.20.0",
    bridge: { name: "cni0", address: "10.244.1.1/24" },
    hosts: LB_PODS.filter((x) => x.node === NODE).map((p) => ({ name: p.name, ip: p.ip })),
    setUpHost: (ns) => ns.localRoute(`${VIP}/32`),
  }));
  // Strict reverse-path filtering, as many distributions ship it: the LB pods' replies (source =
  // VIP) must pass it through the agent's own route, with no loosening (see nodeForwarding.ts).
  await node.sysctl("net.ipv4.conf.all.rp_filter", "1");
  // Someone else's route to the pool's neighbourhood: the agent must leave it alone.
  await node.route("10.99.0.0/24", "10.244.1.10");
  proxy = new TcpProxy({
    host: "127.0.0.1",
    port: Number(new URL(process.env.PORTABLE_LB_TEST_SERVER!).port),
  });
  await proxy.up();
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const name of [NODE, OTHER_NODE]) await core.createNode({ body: { metadata: { name } } });
  for (const p of LB_PODS) {
    const pod: V1Pod = {
      metadata: { name: p.name, labels: { app: LB_APP_LABEL } },
      spec: { nodeName: p.node, containers: [{ name: "controller", image: "portable-lb" }] },
    };
    await core.createNamespacedPod({ namespace: NS, body: pod });
  }
  // An unrelated pod on the node, not an LB pod: never a next hop.
  await core.createNamespacedPod({
    namespace: NS,
    body: { metadata: { name: "app" }, spec: { nodeName: NODE, containers: [{ name: "a", image: "app" }] } },
  });
  await setReady("lb-1", true);
  await setReady("lb-2", false);
  await setReady("lb-3", true);
});

afterAll(async () => {
  await agent?.stop();
  await proxy?.cut();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  for (const name of [NODE, OTHER_NODE]) await core.deleteNode({ name }).catch(() => undefined);
  await lab?.destroy();
});

describe("node agent in a node network namespace", () => {
  it("routes the VIP pools to the node's ready LB pod, and VIP traffic to the node reaches it", async () => {
    agent = await start();
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10");
    const { counts, failures } = await answering();
    expect(failures).toBe(0);
    expect(counts).toEqual({ "lb-1": 40 });
    const routes = JSON.parse(await node.ip("-j", "route", "show", "10.1.1.0/24")) as { protocol: string }[];
    expect(routes.map((r) => r.protocol)).toEqual([String(NODE_ROUTE_PROTO)]);
    // Ready once the run that put the routes in finishes (the BFD steering and the metadata guard's
    // set come after the routes, in the same run): on a loaded machine, after the traffic above.
    await settle(async () => (await readyz()) === 200);
  });

  it("follows readiness: two ready pods share the pools (multipath), a not-ready one leaves", async () => {
    await setReady("lb-2", true);
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10,10.244.1.11");
    await setReady("lb-1", false);
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.11");
    const { counts, failures } = await answering();
    expect(failures).toBe(0);
    expect(counts).toEqual({ "lb-2": 40 });
  });

  it("keeps the route to a routed pod that loses readiness while none other is ready, and says so to it", async () => {
    // lb-2 alone is routed (previous case); its node's kubelet dying would make it not Ready.
    await setReady("lb-2", false);
    await settle(async () => (await lbPodAnswer("10.244.1.11")).body.ready === false);
    expect(await lbPodAnswer("10.244.1.11")).toEqual({
      status: 503,
      body: { podIp: "10.244.1.11", routed: true, ready: false, forwarding: true, synced: true },
    });
    // The pod withdraws on that answer; its flows still arrive until the router has moved them.
    expect(await ourRoutes()).toEqual(["10.1.1.0/24>10.244.1.11"]);
    expect((await answering()).failures).toBe(0);
    // A pod that was never routed learns it is neither routed nor ready.
    expect(await lbPodAnswer("10.244.1.10")).toMatchObject({
      status: 503,
      body: { routed: false, ready: false },
    });
    await setReady("lb-2", true);
    await settle(async () => (await lbPodAnswer("10.244.1.11")).status === 200);
    expect((await lbPodAnswer("10.244.1.11")).body).toMatchObject({ routed: true, ready: true });
  });

  it("keeps its routes while the API server is gone, and catches up when it is back", async () => {
    await proxy.cut();
    await settle(async () =>
      (await agent!.registry.getSingleMetricAsString("portable_lb_api_connected")).endsWith(" 0"),
    );
    // A change the agent cannot see yet.
    await setReady("lb-1", true);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await ourRoutes()).toEqual(["10.1.1.0/24>10.244.1.11"]);
    expect((await answering()).failures).toBe(0);
    // A restart while the API server is gone applies nothing: an empty cache is not "no LB pods".
    await agent!.stop();
    agent = await start();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(agent.applied()).toBe(false);
    expect(await readyz()).toBe(503);
    expect(await ourRoutes()).toEqual(["10.1.1.0/24>10.244.1.11"]);
    expect((await answering()).failures).toBe(0);
    await proxy.up();
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10,10.244.1.11");
  });

  it("adopts its routes on restart: no change, traffic keeps flowing", async () => {
    await agent!.stop();
    const traffic = answering();
    agent = await start();
    await settle(() => agent!.applied());
    expect(await ourRoutes()).toEqual(["10.1.1.0/24>10.244.1.10,10.244.1.11"]);
    expect(await agent.registry.getSingleMetricAsString("portable_lb_node_route_changes_total")).toMatch(
      / 0$/m,
    );
    expect((await traffic).failures).toBe(0);
  });

  it("puts back a route someone removed, and reports a node that stopped forwarding", async () => {
    await node.ip("route", "del", "10.1.1.0/24", "proto", String(NODE_ROUTE_PROTO));
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10,10.244.1.11");
    await node.sysctl("net.ipv4.ip_forward", "0");
    await settle(async () => (await readyz()) === 503);
    expect(await agent!.registry.getSingleMetricAsString("portable_lb_node_ip_forward")).toMatch(/ 0$/m);
    await node.sysctl("net.ipv4.ip_forward", "1");
    await settle(async () => (await readyz()) === 200);
  });

  it("hears at once from `ip monitor` of a removed route and a node that stopped forwarding, without its periodic check", async () => {
    await agent!.stop();
    // Its periodic check far away: only the monitor's news can bring the repairs below in time.
    agent = await start(600_000);
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10,10.244.1.11");
    await node.ip("route", "del", "10.1.1.0/24", "proto", String(NODE_ROUTE_PROTO));
    await settle(async () => (await ourRoutes()).join() === "10.1.1.0/24>10.244.1.10,10.244.1.11", 5_000);
    await node.sysctl("net.ipv4.ip_forward", "0");
    await settle(async () => (await readyz()) === 503, 5_000);
    await node.sysctl("net.ipv4.ip_forward", "1");
    await settle(async () => (await readyz()) === 200, 5_000);
    await agent.stop();
    agent = await start();
  });

  it("hands the reflectors' BFD packets to the node to the LB pod it routes the pools to", async () => {
    // A reflector (config.bgp.routeReflectors) behind the client link; strict rp_filter needs its route.
    const reflector = config.bgp!.routeReflectors[0]!;
    await client.ip("addr", "add", `${reflector}/32`, "dev", "lo");
    await node.route(`${reflector}/32`, "10.20.0.2");
    // The pools go to lb-1 and lb-2 (multipath): BFD, which cannot be split, to the first.
    const received = podNamespaces.get("lb-1")!.exec(
      process.execPath,
      [
        "-e",
        `const s = require("node:dgram").createSocket("udp4");
         s.on("message", (m, r) => { console.log(r.address + " " + m); process.exit(0); });
         s.bind(${BFD_MULTIHOP_PORT}, () => console.error("listening"));
         setTimeout(() => process.exit(1), 5000);`,
      ],
      { timeoutMs: 10_000 },
    );
    await new Promise((r) => setTimeout(r, 500));
    // As a reflector sends BFD to the speaker's (masqueraded) address: the node's.
    await client.exec(process.execPath, [
      "-e",
      `const s = require("node:dgram").createSocket("udp4");
       s.bind({ address: "${reflector}", port: 49152 }, () =>
         s.send("bfd", ${BFD_MULTIHOP_PORT}, "10.20.0.1", () => s.close()));`,
    ]);
    expect((await received).stdout.trim()).toBe(`${reflector} bfd`);
    expect(await node.run("nft", ["list", "table", "ip", STEERING_TABLE])).toContain(
      "ip daddr set 10.244.1.10",
    );
  });

  it("lets its node's LB pods, and only them, through the node's metadata guard in the cloud-routes mode", async () => {
    // The guard as the cloud machines' bootstrap loads it.
    await node.run("nft", ["-f", "-"], { input: metadataGuardRules() });
    const allowed = async () =>
      parseAccessSet(
        await node.run("nft", ["-j", "list", "set", "inet", METADATA_GUARD.table, METADATA_GUARD.lbPodsSet]),
      ).join(",");
    try {
      // BGP mode: no pod needs the credentials; the set stays empty.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await allowed()).toBe("");
      await agent!.stop();
      const cloudRoutes = lbConfigSchema.parse({
        ...config,
        routingMode: "cloud-routes",
        bgp: undefined,
        cloudRoutes: { cloud: "aws", routeTableIds: ["rtb-0123abcd"] },
      });
      agent = await start(500, cloudRoutes);
      // Both of this node's LB pods, ready or not (a pod needs its credentials before it is ready);
      // never lb-3 of the other node, nor any pod that is not an LB pod.
      await settle(async () => (await allowed()) !== "");
      expect(await allowed()).toBe("10.244.1.10,10.244.1.11");
      // Back to BGP: the set is emptied again.
      await agent.stop();
      agent = await start();
      await settle(async () => (await allowed()) === "");
    } finally {
      await node.run("nft", ["delete", "table", "inet", METADATA_GUARD.table]);
    }
  });

  it("is deployable: the API server accepts the DaemonSet the Pulumi component renders (dry run)", async () => {
    const spec = nodeAgentPodSpec({
      namespace: NS,
      config,
      configMapName: "cm",
      podAnnotations: {},
      image: "portable-lb",
      nodeSelector: { "portable-lb.io/load-balancer": "true" },
      priorityClassName: "portable-lb-dataplane",
    }) as V1PodSpec;
    const labels = { app: "node-agent" };
    await adminKc.makeApiClient(AppsV1Api).createNamespacedDaemonSet({
      namespace: NS,
      dryRun: "All",
      body: {
        metadata: { name: "node-agent" },
        spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec } },
      },
    });
  });

  it("removes the route when the node has no LB pod left, and never touches other routes", async () => {
    await core.deleteNamespacedPod({ name: "lb-1", namespace: NS, gracePeriodSeconds: 0 });
    await core.deleteNamespacedPod({ name: "lb-2", namespace: NS, gracePeriodSeconds: 0 });
    await settle(async () => (await ourRoutes()).length === 0);
    // No pod: the reflectors' BFD is left to the node again (no table of ours).
    await settle(async () => (await node.exec("nft", ["list", "table", "ip", STEERING_TABLE])).code !== 0);
    const other = await node.ip("route", "show", "10.99.0.0/24");
    expect(other).toContain("via 10.244.1.10");
  });
});
