// The loss of the controller, with the image's real commands: an LB pod (controller and speaker,
// run as the pod spec renders them) fed by the local control plane, announcing a VIP to a real
// route reflector (run as its pod spec renders it). A killed controller's presence socket closes, and
// the speaker's watchdog withdraws the VIP at once; a frozen (SIGSTOP) one stops renewing its
// announcement lease, and the watchdog withdraws it once the lease's TTL has passed;
// the speaker's preStop withdraws through BIRD when the controller is hung or gone, and through
// the controller when it answers.
import { CoreV1Api, DiscoveryV1Api } from "@kubernetes/client-node";
import { renderRouteReflectorBird } from "@portable-lb/core/bgp";
import { ANNOUNCEMENT_LEASE, type LbConfigInput } from "@portable-lb/core/config";
import { join } from "node:path";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";
import { RR_PATHS, routeReflectorPodSpec } from "../../packages/core/src/routeReflector/podSpec.ts";
import { DeployedPod, removeDeployedPods } from "../harness/netns/deployedPod.ts";
import { LbPod } from "../harness/netns/lbPod.ts";
import { type LabNamespace, NetnsLab, waitUntil } from "@portable-lb/lab";
import { settle } from "../harness/settle.ts";
import { testKubeConfig, testKubeconfig } from "../harness/testEnv.ts";

const NS = `ctlloss-${process.pid}`;
const POD_IP = "10.244.5.10";
const RR_IP = "10.244.5.2";
const NODE_IP = "10.244.5.1";
const VIP = "10.1.5.1";
const timing = {
  bfd: { minRxMs: 100, minTxMs: 100, multiplier: 3 },
  timers: { holdTimeS: 9, keepaliveS: 3 },
};
const config: LbConfigInput = {
  // A class of its own: integration tests share one API server, and every class has its own allocator.
  loadBalancerClass: "portable-lb.io/ctlloss",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.5.0/24", avoidBuggyIps: true }],
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: [RR_IP], gracefulRestartS: 120, ...timing },
};

const core = testKubeConfig().makeApiClient(CoreV1Api);
const discovery = testKubeConfig().makeApiClient(DiscoveryV1Api);

let lab: NetnsLab;
let rr: LabNamespace;
let podNs: LabNamespace;
let lb: LbPod;
/** The reflector's BIRD socket (in its pod's run emptyDir). */
let rrSocket: string;

/** Whether the reflector holds the VIP (from this pod: the only speaker). */
async function announced(): Promise<boolean> {
  // BIRD answers "Network not found" (exit 1) for a prefix it does not hold.
  const r = await rr.exec("birdc", ["-s", rrSocket, "show", "route", `${VIP}/32`]);
  return r.stdout.includes(`${VIP}/32`);
}

/** Polls every 20 ms until the reflector's view is `want`; ms since `from`, or undefined after 10 s. */
async function msUntilAnnounced(want: boolean, from = performance.now()): Promise<number | undefined> {
  return (await waitUntil(async () => (await announced()) === want, 10_000, 20))
    ? Math.round(performance.now() - from)
    : undefined;
}

/** The speaker container's preStop hook, as the kubelet runs it (exec inside the container). */
async function preStop(): Promise<{ ok: boolean; out: string; ms: number }> {
  const started = performance.now();
  const r = await lb.pod.preStop("bgp-speaker", 30_000);
  return {
    ok: r?.ok ?? false,
    out: r?.detail ?? "no preStop hook",
    ms: Math.round(performance.now() - started),
  };
}

/** The pod (both containers) started, announcing the VIP. */
async function startPod(): Promise<void> {
  lb = await LbPod.create({
    ns: podNs,
    name: "lbloss",
    nodeName: "node",
    podIp: POD_IP,
    nodeIp: NODE_IP,
    config,
    dir: lab.dir,
    kubeconfig: testKubeconfig(),
    namespace: NS,
  });
  await lb.start();
  await settle(announced, 60_000);
}

beforeAll(async () => {
  lab = await NetnsLab.create("ctlloss");
  rr = await lab.namespace("rr");
  podNs = await lab.namespace("pod", { forwarding: true });
  const segment = await lab.bridge(rr, "seg", `${RR_IP}/24`);
  await lab.attach(segment, podNs, `${POD_IP}/24`, "eth0");
  const node = await lab.namespace("node");
  await lab.attach(segment, node, `${NODE_IP}/24`, "eth0");
  // What the node agent does: the node hands the pool's traffic to the LB pod (its check needs it).
  await node.route("10.1.5.0/24", POD_IP);
  // The reflector as its pod spec runs it.
  const reflector = await DeployedPod.create({
    name: "rr",
    namespace: "portable-lb-system",
    spec: routeReflectorPodSpec({
      configSecret: "rr",
      node: "rr",
      image: "portable-lb",
      priorityClassName: "p",
    }),
    ns: rr,
    nodeName: "rr",
    dir: join(lab.dir, "rr"),
    runtime: { hostIP: RR_IP },
    secrets: {
      rr: {
        [RR_PATHS.configFile]: renderRouteReflectorBird({
          routerId: RR_IP,
          asn: 64512,
          speakerRanges: ["10.244.0.0/16"],
          speakerLocalAddress: RR_IP,
          vipPrefixes: ["10.1.5.0/24"],
          upstreamRouters: [],
          gracefulRestartS: 120,
          ...timing,
        }),
      },
    },
  });
  rrSocket = join(reflector.volumePath("run"), "bird.ctl");
  reflector.start("bird");
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedService({
    namespace: NS,
    body: { ...lbService("web", { ns: NS, class: config.loadBalancerClass! }), status: {} },
  });
  await discovery.createNamespacedEndpointSlice({
    namespace: NS,
    body: slice("web", [{ ip: "10.244.5.20" }], { ns: NS, name: "web-1" }),
  });
  await startPod();
});

afterAll(async () => {
  await lb?.destroy();
  await removeDeployedPods();
  await lab?.destroy();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
});

describe("the loss of the controller", () => {
  it("a frozen controller (SIGSTOP): the VIP is withdrawn after the lease's TTL, and back once it resumes", async () => {
    await lb.controller!.signal("SIGSTOP", 0);
    const withdrawnMs = await msUntilAnnounced(false);
    await lb.controller!.signal("SIGCONT", 0);
    const resumedAt = performance.now();
    const backMs = await msUntilAnnounced(true, resumedAt);
    console.log(`controller SIGSTOP: withdrawn after ${withdrawnMs} ms; SIGCONT: back after ${backMs} ms`);
    // From the signal; the lease was renewed at most one period before it.
    expect(withdrawnMs).toBeGreaterThanOrEqual(ANNOUNCEMENT_LEASE.ttlMs - ANNOUNCEMENT_LEASE.renewMs);
    expect(withdrawnMs).toBeLessThan(ANNOUNCEMENT_LEASE.ttlMs + 1_000);
    expect(backMs).toBeLessThan(1_000);
    expect(lb.speaker!.lastLines(50)).toContain("withdrawing every VIP");
  });

  it("a killed controller: withdrawn within a second; preStop then withdraws through BIRD at once", async () => {
    const killedAt = performance.now();
    await lb.controller!.kill();
    const withdrawnMs = await msUntilAnnounced(false, killedAt);
    console.log(`controller SIGKILL: withdrawn after ${withdrawnMs} ms`);
    // The process's death closes its presence socket: no waiting for the lease.
    expect(withdrawnMs).toBeLessThan(1_000);
    expect(lb.speaker!.lastLines(50)).toContain("the controller's process is gone");
    const r = await preStop();
    expect({ ok: r.ok, out: r.out }).toEqual({
      ok: true,
      out: expect.stringContaining("withdrawn through BIRD"),
    });
    expect(r.out).toContain("ECONNREFUSED");
    expect(r.ms).toBeLessThan(5_000);
    expect(await announced()).toBe(false);
  });

  it("a restarted pod announces again; preStop with a hung controller withdraws through BIRD after its wait", async () => {
    await lb.destroy();
    await startPod();
    await lb.controller!.signal("SIGSTOP", 0);
    const r = await preStop();
    console.log(`preStop with a hung controller: ${r.ok ? "succeeded" : "failed"} after ${r.ms} ms`);
    expect({ ok: r.ok, out: r.out }).toEqual({
      ok: true,
      out: expect.stringContaining("withdrawn through BIRD"),
    });
    expect(r.out).toContain("no answer within 5 s");
    expect(await announced()).toBe(false);
    await lb.controller!.kill(); // the kubelet's SIGKILL at the end of the grace period
  });

  it("preStop with a live controller: withdrawn by the controller, which keeps the VIP back", async () => {
    await lb.destroy();
    await startPod();
    const r = await preStop();
    console.log(`preStop with a live controller: ${r.ok ? "succeeded" : "failed"} after ${r.ms} ms`);
    expect({ ok: r.ok, out: r.out }).toEqual({
      ok: true,
      out: expect.stringContaining("withdrawn by the controller"),
    });
    expect(await announced()).toBe(false);
    // The controller runs on (it drains until SIGTERM), renewing nothing: the VIP stays withdrawn.
    await new Promise((r) => setTimeout(r, 2 * ANNOUNCEMENT_LEASE.ttlMs));
    expect(await announced()).toBe(false);
  });
});
