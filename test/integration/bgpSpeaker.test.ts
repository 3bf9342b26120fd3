// The controller's BGP side against real BIRDs: an LB pod namespace running the image's speaker
// container as the pod spec renders it (BIRD and the lease watchdog), driven by SpeakerControl and
// AnnouncementLease (what the controller calls), and two route reflector namespaces running the
// reflector's pod with the config portable-lb renders for them. VIPs appear at the reflectors with the node as next hop, follow the announced set and the
// export set, go within a second when the lease stops being renewed, and drain withdraws them
// before it returns. Last, the preStop command withdraws through BIRD alone, with no controller.
import { renderRouteReflectorBird, renderSpeakerBird } from "@portable-lb/core/bgp";
import { ANNOUNCEMENT_LEASE, BIRD_RUN_FILES, LB_COMMANDS, lbConfigSchema } from "@portable-lb/core/config";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { AnnouncementLease, leaseSchema, speakerInstance } from "../../lb-image/src/bgp/announcementLease.ts";
import { ControllerPresence } from "../../lb-image/src/bgp/controllerPresence.ts";
import { BirdControl } from "../../lb-image/src/bgp/birdControl.ts";
import { parseProtocols, protocolUp } from "../../lb-image/src/bgp/birdOutput.ts";
import { SessionMonitor } from "../../lb-image/src/bgp/sessionMonitor.ts";
import { SpeakerControl } from "../../lb-image/src/bgp/speakerControl.ts";
import { Registry } from "prom-client";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { RR_PATHS, routeReflectorPodSpec } from "../../packages/core/src/routeReflector/podSpec.ts";
import { type LabNamespace, NetnsLab, waitUntil } from "@portable-lb/lab";
import { DeployedPod, removeDeployedPods } from "../harness/netns/deployedPod.ts";
import type { WatchedProcess } from "../harness/netns/watchedProcess.ts";
import { settle } from "../harness/settle.ts";

const POD_IP = "10.244.1.10";
const RR_IPS = ["10.244.1.2", "10.244.1.3"];
const NODE_IP = "10.244.1.1"; // the next hop must resolve at the reflectors: on their segment here
const timing = {
  bfd: { minRxMs: 100, minTxMs: 100, multiplier: 3 },
  timers: { holdTimeS: 9, keepaliveS: 3 },
};
const bin = (command: string) => join(__dirname, "../../lb-image/bin", command);
// The launchers start with `#!/usr/bin/env node`: this Node first on PATH, as in the image.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;

let lab: NetnsLab;
let pod: LabNamespace;
const rrs: LabNamespace[] = [];
/** Each reflector's BIRD folder (its pod's run emptyDir). */
const rrDirs: string[] = [];
const reflectors: WatchedProcess[] = [];
/** BIRD's folder shared by the LB pod's containers (its bird-run emptyDir). */
let dir: string;
let lease: AnnouncementLease;
let speaker: SpeakerControl;
let speakerProcess: WatchedProcess;
let bird: BirdControl;
/** The controller's renewals (what the controller does every ANNOUNCEMENT_LEASE.renewMs). */
let renewals: NodeJS.Timeout | undefined;
let lastRenewal = 0;
let presence: ControllerPresence;

function startRenewing(): void {
  // Naming the speaker that runs now, as the controller does once it has configured its BIRD.
  const renew = () =>
    void speakerInstance(dir)
      .then((id) => lease.renew(id!))
      .then(() => (lastRenewal = performance.now()));
  renew();
  renewals = setInterval(renew, ANNOUNCEMENT_LEASE.renewMs);
}
function stopRenewing(): void {
  clearInterval(renewals);
  renewals = undefined;
}

/** Reflector `i`'s VIP routes as "prefix via next-hop". */
async function reflectorRoutes(i: number): Promise<string[]> {
  const out = await rrs[i]!.run("birdc", ["-s", join(rrDirs[i]!, "bird.ctl"), "show", "route", "all"]);
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

/** Both reflectors' VIP routes, e.g. [["10.1.1.10/32 via …"], []]. */
const routesAt = () => Promise.all([0, 1].map(reflectorRoutes));
const via = (...vips: string[]) => vips.map((v) => `${v}/32 via ${NODE_IP}`);

/** Each reflector's BGP sessions (dynamic, one per speaker) with their last change: a reset shows. */
/** Each reflector protocol's name, state and since when (ms of the day, as BIRD prints hh:mm:ss.mmm). */
async function reflectorSessions(i: number): Promise<{ session: string; sinceMs: number }[]> {
  const out = await rrs[i]!.run("birdc", ["-s", join(rrDirs[i]!, "bird.ctl"), "show", "protocols"]);
  return parseProtocols(out).map((s) => ({
    session: `${s.name} ${s.info}`,
    sinceMs: (s.since ?? "").split(":").reduce((ms, part) => ms * 60 + Number(part) * 1000, 0),
  }));
}

/** Polls every 20 ms until `check` holds; the ms it took, or undefined after `timeoutMs`. */
async function msUntil(check: () => Promise<boolean>, timeoutMs: number, from = performance.now()) {
  return (await waitUntil(check, timeoutMs, 20)) ? Math.round(performance.now() - from) : undefined;
}

beforeAll(async () => {
  lab = await NetnsLab.create("bgpspk");
  pod = await lab.namespace("pod");
  const segment = await lab.bridge(pod, "seg", `${POD_IP}/24`);
  await lab.attach(segment, await lab.namespace("node"), `${NODE_IP}/24`, "eth0");
  for (const [i, ip] of RR_IPS.entries()) {
    const rr = await lab.namespace(`rr${i}`);
    await lab.attach(segment, rr, `${ip}/24`, "eth0");
    rrs.push(rr);
    const reflectorPod = await DeployedPod.create({
      name: `rr${i}`,
      namespace: "portable-lb-system",
      spec: routeReflectorPodSpec({
        configSecret: `rr${i}`,
        node: `rr${i}`,
        image: "portable-lb",
        priorityClassName: "p",
      }),
      ns: rr,
      nodeName: `rr${i}`,
      dir: join(lab.dir, `rr${i}`),
      runtime: { hostIP: ip },
      secrets: {
        [`rr${i}`]: {
          [RR_PATHS.configFile]: renderRouteReflectorBird({
            routerId: ip,
            asn: 64512,
            speakerRanges: ["10.244.0.0/16"],
            speakerLocalAddress: ip,
            vipPrefixes: ["10.1.1.0/24"],
            upstreamRouters: [],
            gracefulRestartS: 120,
            ...timing,
          }),
        },
      },
    });
    rrDirs.push(reflectorPod.volumePath("run"));
    reflectors.push(reflectorPod.start("bird"));
  }
  // The LB pod's speaker container; this test plays its controller.
  const lbPod = await DeployedPod.create({
    name: "lb",
    namespace: "portable-lb-system",
    spec: lbPodSpec({
      config: lbConfigSchema.parse({
        routingMode: "bgp",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        bgp: { asn: 64512, routeReflectors: RR_IPS },
      }),
      image: "portable-lb",
      serviceAccountName: "lb",
      priorityClassName: "p",
      nodeSelector: {},
      configMapName: "lb",
    }),
    ns: pod,
    nodeName: "node",
    dir: join(lab.dir, "lb"),
    runtime: { podIP: POD_IP, hostIP: NODE_IP },
    configMaps: { lb: {} },
  });
  dir = lbPod.volumePath("bird-run");
  // The controller's side: the speaker's watchdog must see its process there.
  presence = await ControllerPresence.listen(dir);
  speakerProcess = lbPod.start("bgp-speaker");
  lease = new AnnouncementLease({ runDir: dir, holder: "controller" });
  speaker = new SpeakerControl({
    base: {
      routerId: POD_IP,
      asn: 64512,
      routeReflectors: RR_IPS,
      nextHop: NODE_IP,
      gracefulRestartS: 120,
      ...timing,
    },
    runDir: dir,
    lease,
    // birdc runs in the host namespace: its socket is a path, which namespaces do not separate.
    // Each call's arguments go to birdc.calls, then the real birdc runs.
    clients: { birdc: ["sh", "-c", 'printf "%s\\n" "$*" >>"$0.calls"; exec birdc "$@"', join(dir, "birdc")] },
  });
  bird = new BirdControl(join(dir, BIRD_RUN_FILES.socket));
});

afterAll(async () => {
  bird?.close();
  stopRenewing();
  await presence?.close();
  await removeDeployedPods();
  await lab?.destroy();
});

describe("LB speaker driven by the controller, against two real route reflectors", () => {
  it("announces the VIPs with the node as next hop once BIRD runs and the controller renews its lease", async () => {
    expect(await speaker.announce(["10.1.1.10", "10.1.1.11"])).toBe(true);
    // BIRD starts on the first config with every VIP held back: no lease yet.
    const vipsUp = async () => protocolUp(await bird.run(["show", "protocols"]).catch(() => ""), "vips");
    await settle(async () => (await vipsUp()) === false, 15_000);
    await settle(async () => (await monitor().poll()).reflectors.every((r) => r.established), 30_000);
    expect(await routesAt()).toEqual([[], []]);
    startRenewing();
    await settle(async () => (await routesAt()).every((r) => r.length === 2), 10_000);
    expect(await routesAt()).toEqual([via("10.1.1.10", "10.1.1.11"), via("10.1.1.10", "10.1.1.11")]);
  });

  it("follows the announced set by reloading, and a same set is no change", async () => {
    expect(await speaker.announce(["10.1.1.11", "10.1.1.12"])).toBe(true);
    await settle(async () => (await reflectorRoutes(0)).join() === via("10.1.1.11", "10.1.1.12").join());
    expect(await speaker.announce(["10.1.1.12", "10.1.1.11"])).toBe(false);
  });

  it("refuses a config BIRD's parser rejects and keeps announcing the last good one", async () => {
    await expect(speaker.announce(["10.1.1.300"])).rejects.toThrow(/bird -p/);
    await expect(speaker.announce(["10.1.1.12"], ["10.9.9.9"])).rejects.toThrow(
      /exportTo: 10\.9\.9\.9 is not a route reflector/,
    );
    expect(await reflectorRoutes(0)).toHaveLength(2);
  });

  it("exports only to the reflectors of exportTo, and changes that without resetting a session", async () => {
    await settle(async () => (await routesAt()).every((r) => r.length === 2));
    const sessionsBefore = await Promise.all([0, 1].map(reflectorSessions));
    // BIRD prints a state's start from its monotonic clock as wall time: the same instant can come
    // out a millisecond apart from one call to the next, which no reset could.
    const since = async () => (await monitor().poll()).reflectors.map((r) => [r.peer, r.since!] as const);
    const speakerBefore = await since();
    const vips = ["10.1.1.11", "10.1.1.12"];
    expect(await speaker.announce(vips, [RR_IPS[0]!])).toBe(true);
    await settle(async () => (await reflectorRoutes(1)).length === 0, 5_000);
    expect(await routesAt()).toEqual([via(...vips), []]);
    expect(await speaker.announce(vips, [RR_IPS[1]!])).toBe(true);
    await settle(async () => (await reflectorRoutes(0)).length === 0, 5_000);
    await settle(async () => (await reflectorRoutes(1)).length === 2, 5_000);
    expect(await speaker.announce(vips, [])).toBe(true);
    await settle(async () => (await routesAt()).every((r) => r.length === 0), 5_000);
    expect(await speaker.announce(vips)).toBe(true);
    await settle(async () => (await routesAt()).every((r) => r.length === 2), 5_000);
    // Every change went out as updates on the sessions that were up all along, on both sides.
    // (Same states since the same instants, up to the printing's millisecond, see `since` below.)
    const sessionsAfter = await Promise.all([0, 1].map(reflectorSessions));
    expect(sessionsAfter.map((rr) => rr.map((p) => p.session))).toEqual(
      sessionsBefore.map((rr) => rr.map((p) => p.session)),
    );
    sessionsAfter.forEach((rr, i) =>
      rr.forEach((p, j) =>
        expect(Math.abs(p.sinceMs - sessionsBefore[i]![j]!.sinceMs)).toBeLessThanOrEqual(2),
      ),
    );
    const speakerAfter = await since();
    expect(speakerAfter.map(([peer]) => peer)).toEqual(speakerBefore.map(([peer]) => peer));
    speakerAfter.forEach(([, t], i) => expect(Math.abs(t - speakerBefore[i]![1])).toBeLessThanOrEqual(2));
  });

  it("reports per reflector BGP established and BFD Up, since when, in one poll", async () => {
    // BFD comes Up on its own clock (1 s slow transmit while down, RFC 5880 6.8.3), which the
    // earlier cases need not have waited for on a loaded machine.
    await settle(async () => (await monitor().poll()).reflectors.every((r) => r.bfd?.state === "Up"), 10_000);
    const state = await monitor().poll();
    expect(state.vipsEnabled).toBe(true);
    // The poll's kept connection answers exactly as birdc prints (the parsers read both). The
    // times are left out: a BFD session's "since" was seen 1 ms apart between the two reads.
    const commands = [
      ["show", "protocols"],
      ["show", "bfd", "sessions"],
    ];
    const untimed = (a: string) => a.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+\d{4}/g, "<time>");
    const kept = await bird.runAll(commands.map((c) => c.join(" ")));
    expect(kept.map(untimed)).toEqual(
      await Promise.all(
        commands.map((c) => bird.run(c).then((a) => untimed(a.replace(/^BIRD .* ready\.\n/, "")))),
      ),
    );
    expect(kept.join("").match(/\d{4}-\d\d-\d\dT/g)?.length).toBeGreaterThanOrEqual(4);
    for (const [i, r] of state.reflectors.entries()) {
      expect(r).toMatchObject({
        peer: RR_IPS[i],
        session: `reflector_${i + 1}`,
        established: true,
        bfd: { state: "Up" },
        exported: 2,
      });
      // BIRD's dates: since the sessions came up in this test run, before now.
      for (const since of [r.since!, r.bfd!.since!]) {
        expect(since).toBeLessThanOrEqual(Date.now());
        expect(since).toBeGreaterThan(Date.now() - 300_000);
      }
    }
  });

  it("withdraws every VIP once the lease stops being renewed (a hung controller), and keeps them back over a reconfigure", async () => {
    await settle(async () => (await routesAt()).every((r) => r.length === 2));
    stopRenewing();
    // Measured from the last renewal that landed (the controller's loss is at most a period later).
    await new Promise((r) => setTimeout(r, 20));
    const withdrawnMs = await msUntil(
      async () => (await routesAt()).every((r) => r.length === 0),
      5_000,
      lastRenewal,
    );
    console.log(`lease expiry: withdrawn at both reflectors ${withdrawnMs} ms after the last renewal`);
    expect(withdrawnMs).toBeGreaterThanOrEqual(ANNOUNCEMENT_LEASE.ttlMs);
    // A check period and BGP's update on top of the TTL, with room for a loaded machine.
    expect(withdrawnMs).toBeLessThan(ANNOUNCEMENT_LEASE.ttlMs + 1_000);
    expect(readFileSync(join(dir, BIRD_RUN_FILES.vipsGate), "utf8")).toContain("disabled yes;");
    // A controller that comes back reconfigures before it renews: BIRD keeps the VIPs back.
    expect(await speaker.announce(["10.1.1.13"])).toBe(true);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await routesAt()).toEqual([[], []]);
    const renewedAt = performance.now();
    startRenewing();
    const backMs = await msUntil(
      async () => (await routesAt()).every((r) => r.join() === via("10.1.1.13").join()),
      5_000,
      renewedAt,
    );
    console.log(`lease renewed: the new config's VIPs at both reflectors after ${backMs} ms`);
    expect(backMs).toBeLessThan(1_000);
  });

  it("drain revokes the lease and withdraws everything before it returns, and stays withdrawn", async () => {
    await speaker.drain(10_000);
    expect(await routesAt()).toEqual([[], []]);
    expect(await speaker.announce(["10.1.1.10"])).toBe(false);
    // The renewals go on (the controller still runs), but a revoked lease stays revoked.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(leaseSchema.parse(JSON.parse(readFileSync(lease.file, "utf8")))).toMatchObject({
      announce: false,
    });
    expect(await routesAt()).toEqual([[], []]);
  });

  it("a second drain (the controller's SIGTERM after preStop) shares the first one's work", async () => {
    const disables = () =>
      readFileSync(join(dir, "birdc.calls"), "utf8")
        .split("\n")
        .filter((l) => l.endsWith("disable vips")).length;
    expect(disables()).toBe(1);
    await speaker.drain(10_000);
    expect(disables()).toBe(1);
    expect(await routesAt()).toEqual([[], []]);
    stopRenewing();
  });

  it("reports a dropped session: metric down and a drop naming the peer", async () => {
    const registry = new Registry();
    const drops: string[] = [];
    const m = monitor(registry, (peer) => drops.push(peer));
    const up = async () =>
      (await registry.getSingleMetricAsString("portable_lb_bgp_session_up")).trim().split("\n").slice(2);
    await m.poll();
    expect(await up()).toEqual(RR_IPS.map((ip) => `portable_lb_bgp_session_up{peer="${ip}"} 1`));
    await reflectors[0]!.signal("SIGTERM", 10_000);
    await settle(async () => !(await m.poll()).reflectors[0]!.established, 10_000);
    expect(drops).toEqual([RR_IPS[0]]);
    expect(await up()).toEqual([
      `portable_lb_bgp_session_up{peer="${RR_IPS[0]}"} 0`,
      `portable_lb_bgp_session_up{peer="${RR_IPS[1]}"} 1`,
    ]);
  });
});

describe(`${LB_COMMANDS.withdraw} with no controller`, () => {
  it("withdraws through BIRD's socket alone: revokes the lease, disables the VIPs, waits until none is exported", async () => {
    // BIRD alone, announcing (no speaker process, so no watchdog: this path must work by itself).
    await speakerProcess.signal("SIGTERM", 10_000);
    writeFileSync(join(dir, BIRD_RUN_FILES.vipsGate), "disabled no;\n");
    writeFileSync(
      join(dir, BIRD_RUN_FILES.config),
      renderSpeakerBird({
        routerId: POD_IP,
        asn: 64512,
        routeReflectors: RR_IPS,
        nextHop: NODE_IP,
        gracefulRestartS: 120,
        vips: ["10.1.1.20"],
        ...timing,
      }),
    );
    await pod.spawn("bird", "bird", ["-f", "-c", join(dir, "bird.conf"), "-s", join(dir, "bird.ctl")]);
    await settle(async () => (await reflectorRoutes(1)).join() === via("10.1.1.20").join(), 30_000);
    // Nothing listens on the health port: the controller is gone.
    const started = performance.now();
    const r = await pod.exec(bin(LB_COMMANDS.withdraw), ["--port", "9151", "--run-dir", dir], {
      env: { PATH },
      timeoutMs: 30_000,
    });
    const tookMs = Math.round(performance.now() - started);
    expect({ code: r.code, out: r.stdout }).toEqual({
      code: 0,
      out: expect.stringContaining("withdrawn through BIRD"),
    });
    expect(r.stdout).toContain("ECONNREFUSED");
    console.log(`preStop without a controller: withdrawn through BIRD, command took ${tookMs} ms`);
    expect(await reflectorRoutes(1)).toEqual([]);
    expect(protocolUp(await bird.run(["show", "protocols"]), "vips")).toBe(false);
    // The polls' kept connection was made to the BIRD that stopped: it connects to the new one.
    expect(protocolUp((await bird.runAll(["show protocols"]))[0]!, "vips")).toBe(false);
    expect(leaseSchema.parse(JSON.parse(readFileSync(lease.file, "utf8")))).toMatchObject({
      announce: false,
      holder: "preStop",
    });
  });
});

/** A session monitor on the pod's BIRD (the controller's). */
function monitor(
  registry = new Registry(),
  onDrop: (peer: string) => void = () => undefined,
): SessionMonitor {
  return new SessionMonitor({ bird, reflectors: RR_IPS, registry, onDrop, onProblem: () => undefined });
}
