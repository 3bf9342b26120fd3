// The speaker container's two commands from the image, run as the pod runs them: the entrypoint with
// the real BIRD in a lab namespace, as the bgp-speaker container the pod spec renders (its user,
// capabilities, read-only root and BIRD's emptyDir), and the preStop withdraw against the
// controller's real HTTP server.
import type { V1PodSpec } from "@kubernetes/client-node";
import { BIRD_RUN_FILES, LB_COMMANDS, lbConfigSchema } from "@portable-lb/core/config";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { dirname, join } from "node:path";
import { Registry } from "prom-client";
import { startHttpServer } from "../../lb-image/src/controller/httpServer.ts";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { execCommand, type LabNamespace, NetnsLab, waitUntil } from "@portable-lb/lab";
import { DeployedPod, removeDeployedPods } from "../harness/netns/deployedPod.ts";

const bin = (command: string) => join(__dirname, "../../lb-image/bin", command);
// The launchers start with `#!/usr/bin/env node`: this Node first on PATH, as in the image.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;
// What the speaker needs of the controller's config: the VIPs' protocol, with the watchdog's gate.
const GOOD = [
  "router id 10.0.0.9;",
  "log stderr all;",
  "protocol device {}",
  "protocol static vips {",
  '  include "vips-gate.con[f]";',
  "  ipv4;",
  "}",
  "",
].join("\n");
const config = lbConfigSchema.parse({
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});

let lab: NetnsLab;
let ns: LabNamespace;

beforeAll(async () => {
  lab = await NetnsLab.create("speaker");
  ns = await lab.namespace("lb");
});

afterAll(async () => {
  await removeDeployedPods();
  await lab?.destroy();
});

/** A folder for BIRD's files where no pod runs (the withdraw command's cases). */
function birdDir(name: string): { dir: string; conf: string; sock: string } {
  const dir = join(lab.dir, name);
  mkdirSync(dir, { recursive: true });
  return { dir, conf: join(dir, BIRD_RUN_FILES.config), sock: join(dir, BIRD_RUN_FILES.socket) };
}

/**
 * An LB pod of its own for one case, its speaker container (with `args` after the command, for a
 * flag under test) not started yet; `conf` and `sock` are BIRD's files in its emptyDir.
 */
async function speakerPod(name: string, args: string[] = []) {
  const spec = lbPodSpec({
    config,
    image: "portable-lb",
    serviceAccountName: "lb",
    priorityClassName: "p",
    nodeSelector: {},
    configMapName: "lb",
  }) as V1PodSpec;
  spec.containers.find((c) => c.name === "bgp-speaker")!.args = args;
  const pod = await DeployedPod.create({
    name,
    namespace: "portable-lb-system",
    spec,
    ns,
    nodeName: "node",
    dir: join(lab.dir, name),
    runtime: { podIP: "10.244.1.10", hostIP: "10.0.0.1" },
    configMaps: { lb: {} },
  });
  const dir = pod.volumePath("bird-run");
  return { pod, dir, conf: join(dir, BIRD_RUN_FILES.config), sock: join(dir, BIRD_RUN_FILES.socket) };
}

describe(LB_COMMANDS.speaker, () => {
  it("waits for the controller's config, runs BIRD on it, and stops BIRD cleanly on SIGTERM", async () => {
    const { pod, dir, conf, sock } = await speakerPod("good");
    const speaker = pod.start("bgp-speaker");
    try {
      expect(
        await waitUntil(
          () => speaker.lastLines().includes("waiting for the controller's BIRD config"),
          10_000,
        ),
      ).toBe(true);
      // No announcement lease: the gate is closed before BIRD ever reads its config.
      expect(readFileSync(join(dir, BIRD_RUN_FILES.vipsGate), "utf8")).toContain("disabled yes;");
      await new Promise((r) => setTimeout(r, 1_000));
      expect(speaker.status()).toBeUndefined();
      writeFileSync(conf, GOOD);
      const status = async () => (await ns.exec("birdc", ["-s", sock, "show", "status"])).stdout;
      expect(
        await waitUntil(async () => (await status()).includes("Daemon is up and running"), 15_000, 200),
      ).toBe(true);
      expect((await ns.exec("birdc", ["-s", sock, "show", "protocols", "vips"])).stdout).toMatch(
        /vips .* down /,
      );
      const pid1 = await speaker.mainPid();
      const bird = readFileSync(`/proc/${pid1}/task/${pid1}/children`, "utf8").trim();
      const exit = await speaker.signal("SIGTERM", 10_000);
      expect({ exit, log: exit?.code === 0 ? "" : speaker.lastLines() }).toEqual({
        exit: { code: 0, signal: null },
        log: "",
      });
      // BIRD's own clean shutdown (it logs to stderr as configured), and no BIRD left behind.
      expect(speaker.lastLines()).toContain("Shutdown completed");
      expect((await ns.exec("birdc", ["-s", sock, "show", "status"])).code).not.toBe(0);
      expect(existsSync(`/proc/${bird}`)).toBe(false);
    } finally {
      await speaker.kill();
    }
  });

  it("exits 0 at once on SIGTERM while still waiting for a config", async () => {
    const speaker = (await speakerPod("never-written")).pod.start("bgp-speaker");
    try {
      expect(await waitUntil(() => speaker.lastLines().includes("waiting for"), 10_000)).toBe(true);
      expect(await speaker.signal("SIGTERM", 3_000)).toEqual({ code: 0, signal: null });
    } finally {
      await speaker.kill();
    }
  });

  it("refuses a config BIRD's parser rejects, with BIRD's message (exit 2)", async () => {
    const { pod, conf } = await speakerPod("bad");
    writeFileSync(conf, "router id 10.0.0.9;\nprotocol bgp { neighbor 10.0.0.5; }\n");
    const speaker = pod.start("bgp-speaker");
    expect((await speaker.exited).code).toBe(2);
    // The path as the container sees it: the emptyDir mounted at /run/bird.
    expect(speaker.lastLines()).toContain("BIRD refused the config /run/bird/bird.conf");
    expect(speaker.lastLines()).toContain("Local AS number must be set");
  });

  it("gives up when no config comes in time (exit 1)", async () => {
    const speaker = (await speakerPod("late", ["--wait-seconds", "1"])).pod.start("bgp-speaker");
    expect((await speaker.exited).code).toBe(1);
    expect(speaker.lastLines()).toContain("no BIRD config after 1 s");
  });
});

describe(LB_COMMANDS.withdraw, () => {
  let server: Server | undefined;
  afterEach(async () => {
    const s = server;
    server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  });

  /**
   * Runs the withdraw command as the pod spec does (the controller's health port as an argument)
   * against the controller's real HTTP server on loopback, draining with `drain`; BIRD's folder
   * is `runDir` (by default one where BIRD does not run).
   */
  async function withdrawAgainst(
    drain: () => Promise<void>,
    flags: string[] = [],
    runDir = birdDir("none").dir,
  ) {
    server = await startHttpServer(0, { ready: () => true, drain }, new Registry(), "127.0.0.1");
    const port = (server.address() as { port: number }).port;
    const started = Date.now();
    // On the host: the test's HTTP server is on the host's loopback (in the pod both share one).
    const r = await execCommand(
      bin(LB_COMMANDS.withdraw),
      ["--port", String(port), "--run-dir", runDir, ...flags],
      { env: { PATH }, timeoutMs: 30_000 },
    );
    return { code: r.code, out: r.stdout, elapsedMs: Date.now() - started };
  }

  it("returns 0 only after the controller has withdrawn", async () => {
    let withdrawnAt = 0;
    const r = await withdrawAgainst(async () => {
      await new Promise((res) => setTimeout(res, 1_000));
      withdrawnAt = Date.now();
    });
    expect(r.code).toBe(0);
    expect(withdrawnAt).toBeGreaterThan(0);
    expect(r.elapsedMs).toBeGreaterThanOrEqual(1_000);
    expect(r.out).toContain('"msg":"withdrawn by the controller"');
  });

  it("withdraws through BIRD when the controller fails, and exits 1 naming both failures when BIRD cannot", async () => {
    // A BIRD that has no VIPs' protocol to disable.
    const { dir, conf, sock } = birdDir("no-vips");
    writeFileSync(conf, "router id 10.0.0.9;\nprotocol device {}\n");
    const bird = await ns.spawn("bird-novips", "bird", ["-f", "-c", conf, "-s", sock]);
    try {
      expect(
        await waitUntil(
          async () => (await ns.exec("birdc", ["-s", sock, "show", "status"])).code === 0,
          10_000,
        ),
      ).toBe(true);
      const r = await withdrawAgainst(() => Promise.reject(new Error("birdc: cannot connect")), [], dir);
      expect(r.code).toBe(1);
      expect(r.out).toContain("HTTP 500");
      expect(r.out).toContain("birdc: cannot connect");
      expect(r.out).toContain("withdrawing through BIRD's socket");
      expect(r.out).toContain("cannot disable the VIPs through BIRD");
    } finally {
      await bird.stop();
    }
  });

  it("waits for a hung controller only its share of the bound, then withdraws through BIRD (not running: nothing announced)", async () => {
    const r = await withdrawAgainst(() => new Promise<void>(() => undefined), ["--timeout-seconds", "2"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("no answer within 1 s");
    expect(r.out).toContain("BIRD is not running: nothing is announced");
    expect(r.elapsedMs).toBeLessThan(10_000);
  });

  it("exits 0 when nothing listens and BIRD does not run, and 2 on a bad flag", async () => {
    // In the lab's namespace nothing listens at all.
    const gone = await ns.exec(
      bin(LB_COMMANDS.withdraw),
      ["--port", "9151", "--run-dir", birdDir("none").dir],
      {
        env: { PATH },
      },
    );
    expect(gone.code).toBe(0);
    expect(gone.stdout).toContain("ECONNREFUSED");
    expect(gone.stdout).toContain("BIRD is not running: nothing is announced");
    for (const [flags, message] of [
      [["--port", "http"], `--port must be the controller's health port, 1-65535 (got \\"http\\")`],
      [[], `--port must be the controller's health port, 1-65535 (got \\"\\")`],
      [["--port", "9151", "--timeout-seconds", "0"], "--timeout-seconds must be a positive number"],
    ] as const) {
      const bad = await execCommand(bin(LB_COMMANDS.withdraw), flags, { env: { PATH } });
      expect({ code: bad.code, out: bad.stdout }).toEqual({ code: 2, out: expect.stringContaining(message) });
    }
  });
});
