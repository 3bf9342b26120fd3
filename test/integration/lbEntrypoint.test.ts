// The image's controller command (lb-image/bin/portable-lb-controller) run as the pod runs it: its own
// process inside the LB network namespace, the LB config from a file, POD_NAMESPACE/POD_NAME from the
// environment, the API server reached from inside the namespace (through the API bridge, as a pod
// reaches it through its Service), nftables programmed in that namespace. Same topology as
// lbController.test.ts: client -> LB (forwarding) -> pod bridge -> three HTTP backends.
import { CoreV1Api, DiscoveryV1Api, KubeConfig } from "@kubernetes/client-node";
import { LB_COMMANDS, LB_HTTP_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { gatewayLab } from "../harness/netns/gatewayLab.ts";
import { ApiBridge } from "../harness/netns/apiBridge.ts";
import { getInside as getInsideNs, httpHistogram } from "../harness/netns/httpClient.ts";
import { type LabNamespace, type NetnsLab, waitUntil } from "@portable-lb/lab";
import { startWatched, type WatchedProcess } from "../harness/netns/watchedProcess.ts";
import { testKubeconfig } from "../harness/testEnv.ts";

const NS = `lbentry-${process.pid}`;
const LB_IMAGE = join(__dirname, "../../lb-image");
const bin = (command: string) => join(LB_IMAGE, "bin", command);
const BACKENDS = ["b1", "b2", "b3"].map((name, i) => ({ name, ip: `10.244.0.${11 + i}` }));
// A class of its own: integration tests share one API server, and every class has its own allocator.
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/lbentry",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  // .0 and .255 are valid VIPs, but some clients refuse them; start at .1 as lbController.test does.
  vipPools: [{ name: "web", cidr: "10.1.2.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const VIP = "10.1.2.1";
// The launchers start with `#!/usr/bin/env node`: this Node first on PATH, as in the image.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;

const adminKc = new KubeConfig();
adminKc.loadFromFile(testKubeconfig());
const core = adminKc.makeApiClient(CoreV1Api);
const discovery = adminKc.makeApiClient(DiscoveryV1Api);

let lab: NetnsLab;
let client: LabNamespace;
let lbNs: LabNamespace;
let bridge: ApiBridge;
let controller: WatchedProcess | undefined;
let configFile: string;

/** GET http://127.0.0.1:<port><path> from inside the LB namespace, where the pod's ports are. */
const getInside = (port: number, path: string) => getInsideNs(lbNs, port, path);

async function vip(): Promise<string | undefined> {
  return (await core.readNamespacedServiceStatus({ name: "web", namespace: NS })).status?.loadBalancer
    ?.ingress?.[0]?.ip;
}

const spread = (count: number) =>
  httpHistogram(client, `http://${VIP}/`, { count, by: "name", requestTimeoutMs: 2_000 });

beforeAll(async () => {
  if (!existsSync(join(LB_IMAGE, "dist/main.js")))
    throw new Error("lb-image/dist/main.js is missing: run `npm run build` first (npm test does)");
  ({
    lab,
    client,
    gateway: lbNs,
  } = await gatewayLab("lbentry", {
    gateway: "lb",
    clientNet: "10.10.0",
    bridge: { name: "pods", address: "10.244.0.1/24" },
    hosts: BACKENDS,
  }));
  bridge = await ApiBridge.open(lbNs, testKubeconfig());
  configFile = join(lab.dir, "config.json");
  writeFileSync(configFile, JSON.stringify(config));
  await core.createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await controller?.kill();
  await bridge?.close();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  await lab?.destroy();
});

describe(`${LB_COMMANDS.controller} in a network namespace`, () => {
  it("starts from its config file and serves a VIP through nftables to every backend", async () => {
    controller = startWatched(
      lbNs,
      lab.dir,
      "controller",
      [bin(LB_COMMANDS.controller), "--config", configFile],
      {
        env: { PATH, KUBECONFIG: bridge.kubeconfigFile, POD_NAMESPACE: NS, POD_NAME: "lb-entry-1" },
        // As in its container: PID 1 of its own PID namespace, where only handled signals arrive.
        asPid1: true,
      },
    );
    const running = controller;
    const listening = await waitUntil(
      async () => running.status() !== undefined || (await lbNs.listening(config.ports.health)),
      30_000,
    );
    expect({ listening, exited: running.status(), log: running.status() && running.lastLines() }).toEqual({
      listening: true,
      exited: undefined,
      log: undefined,
    });
    await core.createNamespacedService({
      namespace: NS,
      body: { ...lbService("web", { ns: NS, class: config.loadBalancerClass }), status: {} },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace: NS,
      body: slice("web", BACKENDS, { ns: NS, name: "web-1" }),
    });
    expect(await waitUntil(async () => (await vip()) === VIP, 30_000, 200)).toBe(true);
    expect(
      await waitUntil(async () => Object.keys((await spread(30)).counts).length === 3, 30_000, 500),
    ).toBe(true);
    const h = await spread(60);
    expect({ failures: h.failures, backends: Object.keys(h.counts).sort() }).toEqual({
      failures: 0,
      backends: ["b1", "b2", "b3"],
    });
  });

  it("answers its health and metrics endpoints inside the namespace", async () => {
    expect(await getInside(config.ports.health, LB_HTTP_PATHS.healthz)).toEqual({
      status: 200,
      body: "ok\n",
    });
    expect(await getInside(config.ports.health, LB_HTTP_PATHS.readyz)).toEqual({ status: 200, body: "ok\n" });
    const metrics = await getInside(config.ports.metrics, LB_HTTP_PATHS.metrics);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/^portable_lb_virtual_services 1$/m);
    expect(metrics.body).toMatch(/^portable_lb_allocator_leader 1$/m);
    expect(metrics.body).toMatch(/^portable_lb_api_connected 1$/m);
  });

  it("runs the speaker's preStop against it: the withdraw command waits for /prestop, then readyz drains", async () => {
    const withdraw = await lbNs.exec(bin(LB_COMMANDS.withdraw), ["--port", String(config.ports.health)], {
      env: { PATH },
      timeoutMs: 30_000,
    });
    expect({ code: withdraw.code, out: withdraw.stdout }).toEqual({
      code: 0,
      out: expect.stringContaining('"msg":"withdrawn by the controller"'),
    });
    expect(await getInside(config.ports.health, LB_HTTP_PATHS.readyz)).toEqual({
      status: 503,
      body: "draining\n",
    });
  });

  it("exits 0 on SIGTERM within 10 s and leaves the rules in the kernel for draining connections", async () => {
    const before = await lbNs.run("nft", ["list", "table", "ip", "portable_lb"]);
    expect(before).toContain(VIP);
    const status = await controller!.signal("SIGTERM", 10_000);
    expect({ status, log: status?.code === 0 ? "" : controller!.lastLines() }).toEqual({
      status: { code: 0, signal: null },
      log: "",
    });
    expect(controller!.lastLines(5)).toMatch(/"msg":"stopping"/);
    expect(await lbNs.run("nft", ["list", "table", "ip", "portable_lb"])).toBe(before);
    const after = await spread(30);
    expect({ failures: after.failures, backends: Object.keys(after.counts).sort() }).toEqual({
      failures: 0,
      backends: ["b1", "b2", "b3"],
    });
  });
});
