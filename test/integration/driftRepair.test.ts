// Drift repair with the image's controller command as the pod runs it (its own process and PID
// namespace in the LB network namespace, config from a file, nftables and the local VIP route in that
// namespace), between a client namespace and three HTTP backends, as lbEntrypoint.test.ts. Each fault
// is made from outside the controller, the way an operator or another program would, while the
// client sends one request every ~50 ms; the test asserts that the kernel holds exactly the applied
// table again and traffic flows within the bound, and reports per fault the time to repair and the
// failed requests.
import { CoreV1Api, DiscoveryV1Api, KubeConfig } from "@kubernetes/client-node";
import { LB_COMMANDS, LB_HTTP_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { gatewayLab } from "../harness/netns/gatewayLab.ts";
import { ApiBridge } from "../harness/netns/apiBridge.ts";
import { getInside, httpHistogram } from "../harness/netns/httpClient.ts";
import { type LabNamespace, type NetnsLab, waitUntil } from "@portable-lb/lab";
import { startWatched, type WatchedProcess } from "../harness/netns/watchedProcess.ts";
import { testKubeconfig } from "../harness/testEnv.ts";

const NS = `drift-${process.pid}`;
const LB_IMAGE = join(__dirname, "../../lb-image");
const BACKENDS = ["b1", "b2", "b3"].map((name, i) => ({ name, ip: `10.244.0.${11 + i}` }));
const config = lbConfigSchema.parse({
  // A class of its own: other tests' controllers share the API server and must not serve this one.
  loadBalancerClass: "portable-lb.io/drift-test",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.3.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const VIP = "10.1.3.1";
const CHAIN = "svc_tcp_0a010301_80";
/** The issue's target: from the fault to the kernel repaired. */
const BOUND_MS = 2_000;
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
/** nft on the controller's PATH: the real one, failing while `failFlag` exists (liveness test). */
let shimDir: string;
let failFlag: string;
/** The table as the controller made it (without handles, which a rebuild renumbers). */
let applied: string;

const table = () => lbNs.exec("nft", ["-n", "-s", "list", "table", "ip", "portable_lb"]);
const localRoute = async () =>
  (await lbNs.run("ip", ["route", "show", "table", "local", "type", "local", "dev", "lo"])).includes(VIP);
const healthz = () => getInside(lbNs, config.ports.health, LB_HTTP_PATHS.healthz);

function startController(): WatchedProcess {
  const running = startWatched(
    lbNs,
    lab.dir,
    "controller",
    [join(LB_IMAGE, "bin", LB_COMMANDS.controller), "--config", configFile],
    {
      env: {
        PATH: `${shimDir}:${PATH}`,
        KUBECONFIG: bridge.kubeconfigFile,
        POD_NAMESPACE: NS,
        POD_NAME: "lb-drift-1",
      },
      asPid1: true,
    },
  );
  controller = running;
  return running;
}

/** The kernel holds exactly the applied table and the VIP's local route. */
async function repaired(): Promise<boolean> {
  const t = await table();
  return t.code === 0 && t.stdout === applied && (await localRoute());
}

interface FaultResult {
  fault: string;
  repairMs: number;
  failed: number;
  requests: number;
}
const results: FaultResult[] = [];

/**
 * Sends one request every ~50 ms from the client for `seconds`, makes the fault after 0.5 s, and
 * waits for the kernel to be as applied again; returns the time from the fault to that, and the
 * requests that failed.
 */
async function measure(fault: string, make: () => Promise<unknown>, seconds = 4): Promise<FaultResult> {
  const count = seconds * 20;
  const load = client.exec(
    "bash",
    [
      "-c",
      `for i in $(seq ${count}); do curl -q -s -o /dev/null --noproxy '*' -m 1 -w '%{http_code}\\n' http://${VIP}/; sleep 0.05; done`,
    ],
    { timeoutMs: count * 1_200 + 10_000 },
  );
  await new Promise((r) => setTimeout(r, 500));
  const t0 = performance.now();
  await make();
  const ok = await waitUntil(repaired, 15_000, 20);
  const repairMs = performance.now() - t0;
  const codes = (await load).stdout.split("\n").filter((l) => l !== "");
  const result = {
    fault,
    repairMs: ok ? Math.round(repairMs) : Infinity,
    failed: codes.filter((c) => c !== "200").length,
    requests: codes.length,
  };
  results.push(result);
  return result;
}

const nft = (script: string) => lbNs.run("bash", ["-c", script]);

beforeAll(async () => {
  if (!existsSync(join(LB_IMAGE, "dist/main.js")))
    throw new Error("lb-image/dist/main.js is missing: run `npm run build` first (npm test does)");
  ({
    lab,
    client,
    gateway: lbNs,
  } = await gatewayLab("drift", {
    gateway: "lb",
    clientNet: "10.10.0",
    bridge: { name: "pods", address: "10.244.0.1/24" },
    hosts: BACKENDS,
  }));
  bridge = await ApiBridge.open(lbNs, testKubeconfig());
  configFile = join(lab.dir, "config.json");
  writeFileSync(configFile, JSON.stringify(config));
  shimDir = join(lab.dir, "shim");
  failFlag = join(lab.dir, "nft-fails");
  mkdirSync(shimDir, { recursive: true });
  const realNft = (await lbNs.run("bash", ["-c", "command -v nft"])).trim();
  writeFileSync(
    join(shimDir, "nft"),
    `#!/bin/sh\nif [ -e ${failFlag} ]; then echo "nft: failure injected by the test" >&2; exit 1; fi\nexec ${realNft} "$@"\n`,
  );
  chmodSync(join(shimDir, "nft"), 0o755);
  await core.createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  rmSync(failFlag, { force: true });
  await controller?.kill();
  await bridge?.close();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  await lab?.destroy();
  if (results.length > 0)
    console.log(
      `drift repair, per fault:\n${results.map((r) => `  ${r.fault}: repaired in ${r.repairMs} ms, ${r.failed}/${r.requests} requests failed`).join("\n")}`,
    );
});

describe("drift repair by the controller command", () => {
  it("serves the VIP and reads its table back with no drift", async () => {
    const running = startController();
    expect(
      await waitUntil(
        async () => running.status() !== undefined || (await lbNs.listening(config.ports.health)),
        30_000,
      ),
    ).toBe(true);
    await core.createNamespacedService({
      namespace: NS,
      body: { ...lbService("web", { ns: NS, class: config.loadBalancerClass }), status: {} },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace: NS,
      body: slice("web", BACKENDS, { ns: NS, name: "web-1" }),
    });
    const spread = () =>
      httpHistogram(client, `http://${VIP}/`, { count: 30, by: "name", requestTimeoutMs: 2_000 });
    expect(await waitUntil(async () => Object.keys((await spread()).counts).length === 3, 30_000, 500)).toBe(
      true,
    );
    applied = (await table()).stdout;
    expect(applied).toContain(CHAIN);
    const metrics = await getInside(lbNs, config.ports.metrics, LB_HTTP_PATHS.metrics);
    expect(metrics.body).toMatch(/^portable_lb_verified_vips 1$/m);
    expect(metrics.body).not.toMatch(/^portable_lb_drift_found_total/m);
  });

  it.each([
    ["table flushed", () => nft("nft flush table ip portable_lb")],
    ["table deleted", () => nft("nft delete table ip portable_lb")],
    [
      "foreign rule in a base chain",
      () => nft(`nft insert rule ip portable_lb prerouting ip daddr ${VIP} accept`),
    ],
    ["foreign rule in a service chain", () => nft(`nft insert rule ip portable_lb ${CHAIN} accept`)],
    ["service chain's rule deleted", () => nft(`nft flush chain ip portable_lb ${CHAIN}`)],
    [
      "foreign chain and element added",
      () =>
        nft(
          "nft add chain ip portable_lb mine; nft add element ip portable_lb services '{ 10.9.9.9 . tcp . 22 : goto mine }'",
        ),
    ],
    ["masquerade rule deleted", () => nft("nft flush chain ip portable_lb postrouting")],
    [
      "local VIP route deleted",
      () => lbNs.run("ip", ["route", "del", "local", VIP, "dev", "lo", "table", "local"]),
    ],
  ])(
    "repairs %s within the bound",
    async (fault, make) => {
      const r = await measure(fault, make);
      expect({ repairedWithinBound: r.repairMs <= BOUND_MS, requests: r.requests >= 60 }).toEqual({
        repairedWithinBound: true,
        requests: true,
      });
      // Traffic flows again: every request after the repair is answered.
      const after = await httpHistogram(client, `http://${VIP}/`, { count: 20, requestTimeoutMs: 2_000 });
      expect(after.failures).toBe(0);
    },
    60_000,
  );

  it("counts, logs and reports on its pod what it repaired", async () => {
    const metrics = (await getInside(lbNs, config.ports.metrics, LB_HTTP_PATHS.metrics)).body;
    for (const kind of ["base", "foreign", "service", "missing", "route"])
      expect(metrics).toMatch(new RegExp(`^portable_lb_drift_repaired_total\\{kind="${kind}"\\} [1-9]`, "m"));
    expect(metrics).toMatch(/^portable_lb_last_verification_timestamp_seconds [1-9]/m);
    expect(controller!.lastLines(400)).toMatch(/"msg":"data plane drift repaired"/);
    const events = await core.listNamespacedEvent({
      namespace: NS,
      fieldSelector: "involvedObject.name=lb-drift-1,reason=DataPlaneDriftRepaired",
    });
    expect(events.items.length).toBeGreaterThan(0);
    expect(events.items[0]!.message).toMatch(
      /differed from what the controller applied \(.+\) and were repaired/,
    );
  });

  it("replaces a broken table after a restart instead of looping on it", async () => {
    expect(await controller!.signal("SIGTERM", 10_000)).toEqual({ code: 0, signal: null });
    // What the issue's restarted controller looped on: an element that goes to no service chain with a rule.
    await nft(
      `nft flush table ip portable_lb; nft delete element ip portable_lb services '{ ${VIP} . tcp . 80 }'; ` +
        `nft add chain ip portable_lb other; nft add element ip portable_lb services '{ ${VIP} . tcp . 80 : goto other }'`,
    );
    const r = await measure(
      "controller restarted on a broken table",
      () => Promise.resolve(startController()),
      8,
    );
    // From the process's start: Node, the config, the API server's first list, then one transaction.
    expect(r.repairMs).toBeLessThan(10_000);
    expect((await healthz()).status).toBe(200);
    expect(controller!.lastLines(200)).not.toMatch(/reconcile failed/);
  }, 60_000);

  it("fails /healthz once repairs keep failing, and recovers when they work again", async () => {
    writeFileSync(failFlag, "");
    await nft("nft flush table ip portable_lb");
    // The bound is 20 s; the probe is read every 0.5 s.
    expect(await waitUntil(async () => (await healthz()).status === 503, 30_000, 500)).toBe(true);
    rmSync(failFlag);
    expect(await waitUntil(repaired, 5_000, 50)).toBe(true);
    expect(await waitUntil(async () => (await healthz()).status === 200, 5_000, 100)).toBe(true);
  }, 60_000);
});
