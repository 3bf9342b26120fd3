// The AWS cloud-routes mode against moto's real EC2 server on loopback, with three processes running
// the controller's cloud-routes part (startCloudRoutes, as built), real Leases in the shared control
// plane, and Nodes whose providerID names moto instances. The route of each VIP follows its owner,
// VIPs spread over the pods, a SIGKILLed owner's VIPs move once its Lease expires, a graceful stop
// hands them over at once, throttled writes are retried, a foreign route is left alone and reported,
// a stale route to one of ours is removed, and without the API server the routes stay as they are.
import { CoreV1Api, type CoreV1Event } from "@kubernetes/client-node";
import type { EC2Client } from "@aws-sdk/client-ec2";
import type { LbConfigInput } from "@portable-lb/core/config";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "../../packages/providers/src/lab/processes.ts";
import { lbService } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { ownerOf } from "../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { createRoute, createTestVpc, routeTargets, type TestInstance } from "../harness/cloud/awsTestVpc.ts";
import { MOTO_CREDENTIALS, MOTO_REGION, startMoto, type MotoServer } from "../harness/cloud/motoServer.ts";
import { ThrottlingProxy } from "../harness/cloud/throttlingProxy.ts";
import { repoRoot } from "../harness/repoRoot.ts";
import { TcpProxy } from "../harness/tcpProxy.ts";
import { testKubeConfig, testKubeconfig, TEST_ENV } from "../harness/testEnv.ts";

const NS = `cloudroutes-${process.pid}`;
const CLASS = "portable-lb.io/cloudroutes-aws";
const VIPS = Array.from({ length: 8 }, (_, i) => `10.1.20.${i + 1}`);
const STALE_VIP = "10.1.20.200";
const FOREIGN_VIP = VIPS[0]!;
const PODS = ["lb-a", "lb-b", "lb-c"];

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
let moto: MotoServer;
let ec2: EC2Client;
let throttling: ThrottlingProxy;
let apiProxy: TcpProxy;
let tables: string[];
let lbInstances: TestInstance[];
let foreignEni: string;
let dir: string;
const procs = new Map<string, { child: ChildProcess; out: string[] }>();

function config(tableIds: string[]): LbConfigInput {
  return {
    loadBalancerClass: CLASS,
    routingMode: "cloud-routes",
    podCidr: "10.244.0.0/16",
    vipPools: [{ name: "web", cidr: "10.1.20.0/24" }],
    dataPlane: { mode: "nftables" },
    cloudRoutes: { cloud: "aws", routeTableIds: tableIds, leaseDurationS: 3, renewMs: 1000 },
  };
}

function start(pod: string, i: number, o: { endpoint?: string; server?: string } = {}): void {
  const child = spawn(
    process.execPath,
    [
      "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
      join(repoRoot(), "test/harness/cloud/cloudRoutesProcess.mjs"),
      ...["--config", join(dir, "config.json"), "--kubeconfig", testKubeconfig(), "--namespace", NS],
      ...["--identity", pod, "--node", `${NS}-node-${i}`],
      ...(o.server ? ["--server", o.server] : []),
    ],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...process.env,
        AWS_ENDPOINT_URL_EC2: o.endpoint ?? moto.endpoint,
        AWS_REGION: MOTO_REGION,
        AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
        [TEST_ENV.kubeconfig]: testKubeconfig(),
      },
    },
  );
  const out: string[] = [];
  child.stdout.on("data", (d: Buffer) => out.push(d.toString()));
  child.stderr.on("data", (d: Buffer) => out.push(d.toString()));
  procs.set(pod, { child, out });
}

async function stop(pod: string, signal: "SIGTERM" | "SIGKILL"): Promise<void> {
  const p = procs.get(pod);
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise((r) => p.child.once("exit", r));
  p.child.kill(signal);
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
}

const eniOf = (pod: string) => lbInstances[PODS.indexOf(pod)]!.eni;

/** True when every table routes `vip` to the ENI of its owner among `live` pods. */
async function routedToOwner(vip: string, live: string[]): Promise<boolean> {
  const want = eniOf(ownerOf(vip, live)!);
  return (await routeTargets(ec2, tables, vip)).every((t) => t === want);
}

async function allRoutedToOwners(live: string[], vips = VIPS.slice(1), ms = 20_000): Promise<boolean> {
  return waitUntil(
    async () => (await Promise.all(vips.map((v) => routedToOwner(v, live)))).every(Boolean),
    ms,
    50,
  );
}

async function events(reason: string): Promise<CoreV1Event[]> {
  return (await core.listNamespacedEvent({ namespace: NS })).items.filter((e) => e.reason === reason);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "cloudroutes-"));
  moto = await startMoto();
  ec2 = moto.ec2();
  throttling = new ThrottlingProxy({ host: "127.0.0.1", port: moto.port });
  await throttling.start();
  const server = new URL(process.env[TEST_ENV.server]!);
  apiProxy = new TcpProxy({ host: server.hostname, port: Number(server.port) });
  await apiProxy.up();
  const vpc = await createTestVpc(ec2, { tables: 2, instances: PODS.length + 1 });
  tables = vpc.tables;
  lbInstances = vpc.instances.slice(0, PODS.length);
  foreignEni = vpc.instances[PODS.length]!.eni;
  writeFileSync(join(dir, "config.json"), JSON.stringify(config(tables)));
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const [i, inst] of lbInstances.entries())
    await core.createNode({
      body: { metadata: { name: `${NS}-node-${i}` }, spec: { providerID: inst.providerId } },
    });
  for (const [i, vip] of VIPS.entries()) {
    const name = `web-${i}`;
    await core.createNamespacedService({ namespace: NS, body: lbService(name, { ns: NS, class: CLASS }) });
    await core.replaceNamespacedServiceStatus({
      name,
      namespace: NS,
      body: {
        ...(await core.readNamespacedService({ name, namespace: NS })),
        status: { loadBalancer: { ingress: [{ ip: vip, ipMode: "VIP" }] } },
      },
    });
  }
  // Someone else's route for one of our VIPs, and a route to one of our instances for a VIP no
  // Service has any more (as a crashed earlier LB pod would leave).
  await createRoute(ec2, tables[0]!, FOREIGN_VIP, foreignEni);
  await createRoute(ec2, tables[1]!, STALE_VIP, lbInstances[1]!.eni);
}, 60_000);

afterAll(async () => {
  for (const pod of procs.keys()) await stop(pod, "SIGKILL");
  await core.deleteNamespace({ name: NS }).catch(() => {});
  for (let i = 0; i < PODS.length; i++) await core.deleteNode({ name: `${NS}-node-${i}` }).catch(() => {});
  await apiProxy?.cut();
  await throttling?.stop();
  ec2?.destroy();
  await moto?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

afterEach(() => {
  // Shown only when a test failed: the processes' logs.
  const failed = expect.getState().assertionCalls !== expect.getState().numPassingAsserts;
  if (failed) for (const [pod, p] of procs) console.log(`--- ${pod}\n${p.out.join("").slice(-4000)}`);
});

describe("cloud routes on AWS (moto)", () => {
  it("points each VIP at its owner's ENI in every table, spread over the pods", async () => {
    PODS.forEach((pod, i) => start(pod, i));
    expect(await allRoutedToOwners(PODS)).toBe(true);
    const owners = new Set(VIPS.slice(1).map((v) => ownerOf(v, PODS)));
    expect(owners.size).toBeGreaterThanOrEqual(2);
    const targets = new Set(
      (await Promise.all(VIPS.slice(1).map((v) => routeTargets(ec2, tables, v)))).flat(),
    );
    expect(targets.size).toBe(owners.size);
    expect([...targets].every((t) => PODS.map(eniOf).includes(t!))).toBe(true);
  }, 40_000);

  it("leaves a foreign route for a VIP alone and reports it on the Service", async () => {
    expect(await waitUntil(async () => (await events("ForeignRoute")).length > 0, 10_000, 100)).toBe(true);
    const [e] = await events("ForeignRoute");
    expect(e!.involvedObject.kind).toBe("Service");
    expect(e!.message).toContain(foreignEni);
    const [t0, t1] = await routeTargets(ec2, tables, FOREIGN_VIP);
    expect(t0).toBe(foreignEni);
    expect(t1).toBe(eniOf(ownerOf(FOREIGN_VIP, PODS)!)); // the other table is ours to write
  }, 20_000);

  it("removes a stale route to one of our instances", async () => {
    expect(
      await waitUntil(async () => (await routeTargets(ec2, tables, STALE_VIP)).every((t) => !t), 10_000, 100),
    ).toBe(true);
  }, 20_000);

  it("tells each Service where its VIP is routed", async () => {
    const routed = await events("VipRouted");
    expect(new Set(routed.map((e) => e.involvedObject.name)).size).toBeGreaterThanOrEqual(VIPS.length - 1);
  });

  /** Stops an owner with `signal`; ms until its VIPs point at the others' ENIs, then restarts it. */
  async function moveOnStop(signal: "SIGTERM" | "SIGKILL"): Promise<number> {
    const pod = PODS.find((p) => VIPS.slice(1).some((v) => ownerOf(v, PODS) === p))!;
    const t0 = performance.now();
    await stop(pod, signal);
    expect(
      await allRoutedToOwners(
        PODS.filter((p) => p !== pod),
        VIPS.slice(1),
        15_000,
      ),
    ).toBe(true);
    const ms = performance.now() - t0;
    start(pod, PODS.indexOf(pod));
    expect(await allRoutedToOwners(PODS)).toBe(true);
    return ms;
  }

  it("hands a stopped pod's VIPs over at once (graceful stop)", async () => {
    expect(await moveOnStop("SIGTERM")).toBeLessThan(3_000);
  }, 40_000);

  it("moves a SIGKILLed owner's VIPs once its Lease expires", async () => {
    // The Lease lasts 3 s; pods renew every second.
    expect(await moveOnStop("SIGKILL")).toBeLessThan(8_000);
  }, 60_000);

  it("retries throttled writes until they go through", async () => {
    // lb-c's writes go through the fault proxy; stopping lb-a moves some VIPs to it.
    await stop("lb-c", "SIGTERM");
    throttling.throttle(3);
    start("lb-c", 2, { endpoint: throttling.endpoint });
    expect(await allRoutedToOwners(PODS)).toBe(true);
    await stop("lb-a", "SIGTERM");
    expect(await allRoutedToOwners(["lb-b", "lb-c"])).toBe(true);
    expect(throttling.throttled).toBe(3);
    expect(procs.get("lb-c")!.out.join("")).toContain('"cause":"throttled"');
    start("lb-a", 0);
    expect(await allRoutedToOwners(PODS)).toBe(true);
  }, 60_000);

  it("keeps the routes as they are when the API server is lost (fail static)", async () => {
    // All pods reach the API server through a proxy the test cuts.
    for (const pod of PODS) await stop(pod, "SIGTERM");
    const server = `https://127.0.0.1:${apiProxy.port}`;
    PODS.forEach((pod, i) => start(pod, i, { server }));
    expect(await allRoutedToOwners(PODS)).toBe(true);
    const before = await Promise.all(VIPS.map((v) => routeTargets(ec2, tables, v)));
    await apiProxy.cut();
    await stop("lb-b", "SIGKILL"); // a pod dies too while nobody can reach the API server
    await new Promise((r) => setTimeout(r, 8_000)); // past the Lease's duration, twice
    expect(await Promise.all(VIPS.map((v) => routeTargets(ec2, tables, v)))).toEqual(before);
    await apiProxy.up();
    expect(await allRoutedToOwners(["lb-a", "lb-c"])).toBe(true);
  }, 60_000);
});
