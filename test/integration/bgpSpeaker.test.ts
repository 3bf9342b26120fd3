// The controller's BGP side against real BIRDs: an LB pod namespace running the image's speaker
// container as the pod spec renders it, driven by SpeakerControl (what the controller calls), and a
// route reflector namespace running the reflector's pod with the config portable-lb renders for it.
// VIPs appear at the reflector with the node as next hop, follow the announced set, and drain
// withdraws them before it returns.
import { renderRouteReflectorBird } from "@portable-lb/core/bgp";
import { lbConfigSchema } from "@portable-lb/core/config";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SessionMonitor } from "../../lb-image/src/bgp/sessionMonitor.ts";
import { SpeakerControl } from "../../lb-image/src/bgp/speakerControl.ts";
import { Registry } from "prom-client";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { RR_PATHS, routeReflectorPodSpec } from "../../packages/core/src/routeReflector/podSpec.ts";
import { NetnsLab, type LabNamespace } from "../../packages/providers/src/lab/netns/netnsLab.ts";
import { DeployedPod, IMAGE_PATH, removeContainerMountpoints } from "../harness/netns/deployedPod.ts";
import type { WatchedProcess } from "../harness/netns/watchedProcess.ts";
import { settle } from "../harness/settle.ts";

const POD_IP = "10.244.1.10";
const RR_IP = "10.244.1.2";
const NODE_IP = "10.244.1.1"; // the next hop must resolve at the reflector: on its segment here
const timing = {
  bfd: { minRxMs: 100, minTxMs: 100, multiplier: 3 },
  timers: { holdTimeS: 9, keepaliveS: 3 },
};

let lab: NetnsLab;
let rr: LabNamespace;
/** BIRD's folder shared by the LB pod's containers (its bird-run emptyDir), and the reflector's. */
let dir: string;
let rrDir: string;
let speaker: SpeakerControl;
let reflector: WatchedProcess;

/** The reflector's VIP routes as "prefix via next-hop". */
async function reflectorRoutes(): Promise<string[]> {
  const out = await rr.run("birdc", ["-s", join(rrDir, "bird.ctl"), "show", "route", "all"]);
  const routes: string[] = [];
  let prefix = "";
  for (const line of out.split("\n")) {
    const m = /^(\d+\.\d+\.\d+\.\d+\/\d+)\s/.exec(line);
    if (m) prefix = m[1]!;
    const hop = /BGP\.next_hop: (\S+)/.exec(line);
    if (hop && prefix) routes.push(`${prefix} via ${hop[1]}`);
  }
  return routes.sort();
}

beforeAll(async () => {
  lab = await NetnsLab.create("bgpspk");
  const podNs = await lab.namespace("pod");
  rr = await lab.namespace("rr");
  const segment = await lab.bridge(rr, "seg", `${RR_IP}/24`);
  await lab.attach(segment, podNs, `${POD_IP}/24`, "eth0");
  await lab.attach(segment, await lab.namespace("node"), `${NODE_IP}/24`, "eth0");
  const reflectorPod = await DeployedPod.create({
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
          vipPrefixes: ["10.1.1.0/24"],
          upstreamRouters: [],
          gracefulRestartS: 120,
          ...timing,
        }),
      },
    },
    path: IMAGE_PATH,
  });
  rrDir = reflectorPod.volumePath("run");
  reflector = reflectorPod.start("bird");
  // The LB pod's speaker container; this test plays its controller.
  const lbPod = await DeployedPod.create({
    name: "lb",
    namespace: "portable-lb-system",
    spec: lbPodSpec({
      config: lbConfigSchema.parse({
        routingMode: "bgp",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        bgp: { asn: 64512, routeReflectors: [RR_IP] },
      }),
      image: "portable-lb",
      serviceAccountName: "lb",
      priorityClassName: "p",
      nodeSelector: {},
      configMapName: "lb",
    }),
    ns: podNs,
    nodeName: "node",
    dir: join(lab.dir, "lb"),
    runtime: { podIP: POD_IP, hostIP: NODE_IP },
    configMaps: { lb: {} },
    path: IMAGE_PATH,
  });
  dir = lbPod.volumePath("bird-run");
  lbPod.start("bgp-speaker");
  speaker = new SpeakerControl({
    base: {
      routerId: POD_IP,
      asn: 64512,
      routeReflectors: [RR_IP],
      nextHop: NODE_IP,
      gracefulRestartS: 120,
      ...timing,
    },
    runDir: dir,
    // birdc runs in the host namespace: its socket is a path, which namespaces do not separate.
    // Each call's arguments go to birdc.calls, then the real birdc runs.
    birdc: ["sh", "-c", 'printf "%s\\n" "$*" >>"$0.calls"; exec birdc "$@"', join(dir, "birdc")],
  });
});

afterAll(async () => {
  await lab?.destroy();
  await removeContainerMountpoints();
});

describe("LB speaker driven by the controller, against a real route reflector", () => {
  it("announces the VIPs with the node as next hop once BIRD starts on the first config", async () => {
    expect(await speaker.announce(["10.1.1.10", "10.1.1.11"])).toBe(true);
    await settle(async () => (await reflectorRoutes()).length === 2, 30_000);
    expect(await reflectorRoutes()).toEqual([`10.1.1.10/32 via ${NODE_IP}`, `10.1.1.11/32 via ${NODE_IP}`]);
  });

  it("follows the announced set by reloading, and a same set is no change", async () => {
    expect(await speaker.announce(["10.1.1.11", "10.1.1.12"])).toBe(true);
    await settle(
      async () =>
        (await reflectorRoutes()).join() === `10.1.1.11/32 via ${NODE_IP},10.1.1.12/32 via ${NODE_IP}`,
    );
    expect(await speaker.announce(["10.1.1.12", "10.1.1.11"])).toBe(false);
  });

  it("refuses a config BIRD's parser rejects and keeps announcing the last good one", async () => {
    await expect(speaker.announce(["10.1.1.300"])).rejects.toThrow(/bird -p/);
    expect(await reflectorRoutes()).toHaveLength(2);
  });

  it("drain withdraws everything before it returns, and stays withdrawn", async () => {
    await speaker.drain(10_000);
    await settle(async () => (await reflectorRoutes()).length === 0, 5_000);
    expect(await speaker.announce(["10.1.1.10"])).toBe(false);
    expect(await reflectorRoutes()).toEqual([]);
  });

  it("a second drain (the controller's SIGTERM after preStop) shares the first one's work", async () => {
    const disables = () =>
      readFileSync(join(dir, "birdc.calls"), "utf8")
        .split("\n")
        .filter((l) => l.endsWith("disable vips")).length;
    expect(disables()).toBe(1);
    await speaker.drain(10_000);
    expect(disables()).toBe(1);
    expect(await reflectorRoutes()).toEqual([]);
  });

  it("reports a dropped session: metric down and a drop naming the peer", async () => {
    const registry = new Registry();
    const drops: string[] = [];
    const monitor = new SessionMonitor({
      socket: join(dir, "bird.ctl"),
      peerOf: (session) => [RR_IP][Number(session.split("_")[1]) - 1] ?? session,
      registry,
      onDrop: (peer) => drops.push(peer),
      onProblem: () => undefined,
    });
    const up = async () =>
      (await registry.getSingleMetricAsString("portable_lb_bgp_session_up")).trim().split("\n").pop();
    await monitor.poll();
    expect(await up()).toBe(`portable_lb_bgp_session_up{peer="${RR_IP}"} 1`);
    await reflector.signal("SIGTERM", 10_000);
    await settle(async () => (await monitor.poll()).every((s) => !s.established), 10_000);
    expect(drops).toEqual([RR_IP]);
    expect(await up()).toBe(`portable_lb_bgp_session_up{peer="${RR_IP}"} 0`);
  });
});
