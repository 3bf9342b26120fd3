// The LB controller end to end on this machine: the run's kube-apiserver, a network-namespace lab
// (client -> LB -> three HTTP backends answering with their own name), and the real controller
// programming nftables in the LB namespace. Services and EndpointSlices are made through the API
// the way the EndpointSlice controller would make them.
import { CoreV1Api, DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import type { RunningController } from "../../lb-image/src/controller/controller.ts";
import { gatewayLab, spreadOver } from "../harness/netns/gatewayLab.ts";
import { httpHistogram } from "../harness/netns/httpClient.ts";
import { startNetnsController } from "../harness/netns/netnsController.ts";
import type { LabNamespace, NetnsLab } from "@portable-lb/lab";
import { settle } from "../harness/settle.ts";
import { TcpProxy } from "../harness/tcpProxy.ts";
import { testKubeConfig } from "../harness/testEnv.ts";

const NS = `lbtest-${process.pid}`;
// A class of its own: integration tests share one API server, and every class has its own allocator.
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/lbctl",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const BACKENDS = ["b1", "b2", "b3"].map((name, i) => ({ name, ip: `10.244.0.${11 + i}` }));

const adminKc = testKubeConfig();
const core = adminKc.makeApiClient(CoreV1Api);
const discovery = adminKc.makeApiClient(DiscoveryV1Api);

let lab: NetnsLab;
let client: LabNamespace;
let lbNs: LabNamespace;
let hosts: Map<string, LabNamespace>;
let proxy: TcpProxy;
let controller: RunningController | undefined;

async function start(identity = "lb-1"): Promise<RunningController> {
  return startNetnsController({
    config,
    kubeconfig: testKubeConfig(`https://127.0.0.1:${proxy.port}`),
    namespace: NS,
    pod: lbNs,
    identity,
  });
}

/** A LoadBalancer Service of this test's class with one port, as a user's manifest makes it. */
function createLbService(
  name: string,
  port: { name: string; port: number; protocol: string },
  annotations?: Record<string, string>,
) {
  return core.createNamespacedService({
    namespace: NS,
    body: {
      metadata: { name, ...(annotations && { annotations }) },
      spec: {
        type: "LoadBalancer",
        loadBalancerClass: config.loadBalancerClass,
        allocateLoadBalancerNodePorts: false,
        ports: [port],
      },
    },
  });
}

function slice(endpoints: { ip: string; ready?: boolean; terminating?: boolean }[]): V1EndpointSlice {
  return {
    metadata: {
      name: "web-1",
      namespace: NS,
      labels: { "kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "lbtest" },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: {
        ready: e.ready ?? true,
        serving: (e.ready ?? true) || !!e.terminating,
        terminating: e.terminating ?? false,
      },
    })),
  };
}

async function vip(): Promise<string | undefined> {
  return (await core.readNamespacedServiceStatus({ name: "web", namespace: NS })).status?.loadBalancer
    ?.ingress?.[0]?.ip;
}

/** Backend names answering 60 fresh connections to the VIP. */
const spread = (address: string) => spreadOver(client, `http://${address}/`);

beforeAll(async () => {
  ({
    lab,
    client,
    gateway: lbNs,
    hosts,
  } = await gatewayLab("lbctl", {
    gateway: "lb",
    clientNet: "10.10.0",
    bridge: { name: "pods", address: "10.244.0.1/24" },
    hosts: BACKENDS,
  }));
  proxy = new TcpProxy({
    host: "127.0.0.1",
    port: Number(new URL(process.env.PORTABLE_LB_TEST_SERVER!).port),
  });
  await proxy.up();
  await core.createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await controller?.stop();
  await proxy?.cut();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  await lab?.destroy();
});

describe("LB controller with nftables in a network namespace", () => {
  it("allocates a VIP into status and spreads new connections over every ready backend", async () => {
    controller = await start();
    await createLbService("web", { name: "http", port: 80, protocol: "TCP" });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: slice(BACKENDS) });
    await settle(async () => (await vip()) === "10.1.1.1");
    await settle(async () => Object.keys((await spread("10.1.1.1")).counts).length === 3);
    const { counts, failures } = await spread("10.1.1.1");
    expect(failures).toBe(0);
    expect(Object.keys(counts).sort()).toEqual(["b1", "b2", "b3"]);
  });

  it("follows the endpoints: a removed backend and a not-ready one get no new connections", async () => {
    await discovery.replaceNamespacedEndpointSlice({
      name: "web-1",
      namespace: NS,
      body: slice([BACKENDS[0]!, { ...BACKENDS[1]!, ready: false }]),
    });
    await settle(async () => JSON.stringify(Object.keys((await spread("10.1.1.1")).counts)) === '["b1"]');
    await discovery.replaceNamespacedEndpointSlice({ name: "web-1", namespace: NS, body: slice(BACKENDS) });
    await settle(async () => Object.keys((await spread("10.1.1.1")).counts).length === 3);
  });

  it("keeps serving when the API server is gone, and resyncs when it is back", async () => {
    await proxy.cut();
    await settle(async () => (await controller!.metrics.apiConnected.get()).values[0]?.value === 0);
    const during = await spread("10.1.1.1");
    expect(during.failures).toBe(0);
    expect(Object.keys(during.counts).sort()).toEqual(["b1", "b2", "b3"]);
    // A change made while the controller cannot see it...
    await discovery.replaceNamespacedEndpointSlice({
      name: "web-1",
      namespace: NS,
      body: slice([BACKENDS[2]!]),
    });
    await proxy.up();
    // ...arrives once the watch is back.
    await settle(async () => JSON.stringify(Object.keys((await spread("10.1.1.1")).counts)) === '["b3"]');
  });

  it("adopts the rules on restart instead of flushing them: no change, no failed request", async () => {
    await discovery.replaceNamespacedEndpointSlice({ name: "web-1", namespace: NS, body: slice(BACKENDS) });
    await settle(async () => Object.keys((await spread("10.1.1.1")).counts).length === 3);
    const traffic = httpHistogram(client, "http://10.1.1.1/", {
      count: 1000,
      by: "name",
      requestTimeoutMs: 2_000,
    });
    await controller!.stop();
    controller = await start("lb-2");
    const during = await traffic;
    expect(during.failures).toBe(0);
    const restarted = controller;
    await settle(() => restarted.reconciler.applied);
    expect((await restarted.metrics.ruleChanges.get()).values.reduce((n, v) => n + v.value, 0)).toBe(0);
  });

  it("reports bad input as Events and keeps the good part serving", async () => {
    // (The API server itself refuses malformed EndpointSlice addresses; the controller's own
    // handling of them is covered by desiredState's unit tests.)
    const svc = (name: string, annotations: Record<string, string>, protocol = "TCP") =>
      createLbService(name, { name: "p", port: 80, protocol }, annotations);
    await svc("taken", { "portable-lb.io/load-balancer-ips": "10.1.1.1" });
    await svc("outside", { "portable-lb.io/load-balancer-ips": "192.0.2.1" });
    await svc("sctp", {}, "SCTP");
    await settle(async () => {
      const reasons = new Set((await core.listNamespacedEvent({ namespace: NS })).items.map((e) => e.reason));
      return ["VipInUse", "VipOutsidePools", "UnsupportedProtocol"].every((r) => reasons.has(r));
    });
    const events = (await core.listNamespacedEvent({ namespace: NS })).items;
    expect(events.find((e) => e.reason === "VipInUse")).toMatchObject({
      type: "Warning",
      involvedObject: { kind: "Service", name: "taken" },
      message: `VIP 10.1.1.1 belongs to ${NS}/web; this request waits until ${NS}/web gives it up (is deleted, or requests other addresses in portable-lb.io/load-balancer-ips), or change this Service's request to a free address; it has no address meanwhile`,
    });
    expect(Object.keys((await spread("10.1.1.1")).counts).sort()).toEqual(["b1", "b2", "b3"]);
  });

  it("admits only the Service's source ranges: other clients' packets are dropped in the LB pod", async () => {
    const ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges";
    const restrict = async (field: string[] | undefined, annotation?: string) => {
      const svc = await core.readNamespacedService({ name: "web", namespace: NS });
      svc.spec!.loadBalancerSourceRanges = field;
      svc.metadata!.annotations = { ...svc.metadata!.annotations };
      if (annotation === undefined) delete svc.metadata!.annotations[ANNOTATION];
      else svc.metadata!.annotations[ANNOTATION] = annotation;
      await core.replaceNamespacedService({ name: "web", namespace: NS, body: svc });
    };
    const probe = () =>
      httpHistogram(client, "http://10.1.1.1/", { count: 3, by: "name", requestTimeoutMs: 500 });
    const firewall = async () =>
      (await lbNs.exec("nft", ["list", "table", "ip", "portable_lb_firewall"])).stdout;
    // The client (10.10.0.0/24) is outside: its SYNs are dropped (a timeout, not a refusal).
    await restrict(["192.0.2.0/24"]);
    await settle(async () => (await probe()).answered === 0);
    const refused = await probe();
    expect(refused.failures).toBe(3);
    expect(Object.keys(refused.errors).join()).toMatch(/timed out/i);
    expect(await firewall()).toMatch(/saddr != @allowed counter packets [1-9]\d* bytes \d+ drop/);
    // Admitted: served over every backend again.
    await restrict(["10.10.0.7/24"]);
    await settle(async () => (await spread("10.1.1.1")).failures === 0);
    // The API server refuses an invalid list, in the annotation too (the controller never sees one).
    await expect(restrict(undefined, "10.10.0.0/24, office")).rejects.toThrow(/must be a valid CIDR value/);
    // No ranges at all: every client, and no firewall table left in the pod.
    await restrict(undefined);
    await settle(
      async () => (await lbNs.exec("nft", ["list", "table", "ip", "portable_lb_firewall"])).code !== 0,
    );
    expect((await spread("10.1.1.1")).failures).toBe(0);
  });

  it("moves a UDP client on a fixed source port off a backend that left (its conntrack entry deleted)", async () => {
    // Each backend answers a datagram on 5353 with its name.
    const echo =
      'import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(("0.0.0.0",5353))\nwhile True:\n  d,a=s.recvfrom(512)\n  s.sendto(NAME.encode(),a)\n';
    for (const b of BACKENDS.slice(0, 2))
      await hosts
        .get(b.name)!
        .spawn("udp-echo", "python3", ["-c", echo.replace("NAME", JSON.stringify(b.name))]);
    // The client: 10 datagrams 100 ms apart, always from port 40000; the names that answered.
    const ask = async (address: string) =>
      (
        await client.run("python3", [
          "-c",
          `import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(("0.0.0.0",40000))\ns.settimeout(0.5)\nfor i in range(10):\n  s.sendto(b"q",("${address}",53))\n  try: print(s.recvfrom(512)[0].decode())\n  except socket.timeout: print("-")\n  time.sleep(0.1)\n`,
        ])
      )
        .split("\n")
        .filter(Boolean);
    const udpSlice = (backends: typeof BACKENDS): V1EndpointSlice => ({
      ...slice(backends),
      metadata: { name: "dns-1", namespace: NS, labels: { "kubernetes.io/service-name": "dns" } },
      ports: [{ name: "dns", port: 5353, protocol: "UDP" }],
    });
    await createLbService("dns", { name: "dns", port: 53, protocol: "UDP" });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: udpSlice(BACKENDS.slice(0, 2)) });
    let address = "";
    await settle(async () => {
      address =
        (await core.readNamespacedServiceStatus({ name: "dns", namespace: NS })).status?.loadBalancer
          ?.ingress?.[0]?.ip ?? "";
      return address !== "" && (await ask(address)).every((a) => a !== "-");
    });
    // One source port, one flow: one backend answers all.
    const before = await ask(address);
    expect(new Set(before).size).toBe(1);
    const first = before[0]!;
    const other = BACKENDS.slice(0, 2).find((b) => b.name !== first)!;
    // Its backend leaves the service (it keeps running: only a kept NAT entry could still reach it).
    await discovery.replaceNamespacedEndpointSlice({ name: "dns-1", namespace: NS, body: udpSlice([other]) });
    await settle(
      async () =>
        ((await controller!.metrics.staleUdpFlowsFlushed.get()).values.find((v) => v.labels.result === "ok")
          ?.value ?? 0) >= 1,
    );
    // The very next datagrams from the same port reach the backend that stays.
    expect(await ask(address)).toEqual(Array(10).fill(other.name));
    await core.deleteNamespacedService({ name: "dns", namespace: NS });
  });

  it("releases the VIP and its rules when the Service is deleted", async () => {
    // "taken" asked for web's address; with web gone it would get it, so the others go too.
    for (const name of ["taken", "outside", "sctp"])
      await core.deleteNamespacedService({ name, namespace: NS });
    await core.deleteNamespacedService({ name: "web", namespace: NS });
    await settle(async () => {
      const routes = await lbNs.run("ip", [
        "-j",
        "route",
        "show",
        "table",
        "local",
        "type",
        "local",
        "dev",
        "lo",
      ]);
      return !routes.includes("10.1.1.1");
    });
    const table = await lbNs.run("nft", ["list", "map", "ip", "portable_lb", "services"]);
    expect(table).not.toContain("10.1.1.1");
  });
});

describe("stopping the controller", () => {
  it("ends its watches and timers: no reconnects after stop (else the process never exits)", async () => {
    await controller!.stop();
    controller = undefined;
    const before = proxy.accepted;
    await new Promise((r) => setTimeout(r, 2_500));
    expect(proxy.accepted).toBe(before);
  });
});
