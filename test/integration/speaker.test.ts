// The speaker container's two commands from the image, run as the pod runs them: the entrypoint with
// the real BIRD in a lab namespace, as the bgp-speaker container the pod spec renders (its user,
// capabilities, read-only root and BIRD's emptyDir), and the preStop withdraw against the
// controller's real HTTP server.
import type { V1PodSpec } from "@kubernetes/client-node";
import { LB_COMMANDS, lbConfigSchema } from "@portable-lb/core/config";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { dirname, join } from "node:path";
import { Registry } from "prom-client";
import { startHttpServer } from "../../lb-image/src/controller/httpServer.ts";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { execCommand, NetnsLab, type LabNamespace } from "../../packages/providers/src/lab/netns/netnsLab.ts";
import { DeployedPod, IMAGE_PATH, removeContainerMountpoints } from "../harness/netns/deployedPod.ts";
import { waitUntil } from "../../packages/providers/src/lab/processes.ts";

const bin = (command: string) => join(__dirname, "../../lb-image/bin", command);
// The launchers start with `#!/usr/bin/env node`: this Node first on PATH, as in the image.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;
const GOOD = "router id 10.0.0.9;\nlog stderr all;\nprotocol device {}\n";
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
  await lab?.destroy();
  await removeContainerMountpoints();
});

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
    path: IMAGE_PATH,
  });
  const run = pod.volumePath("bird-run");
  return { pod, conf: join(run, "bird.conf"), sock: join(run, "bird.ctl") };
}

describe(LB_COMMANDS.speaker, () => {
  it("waits for the controller's config, runs BIRD on it, and stops BIRD cleanly on SIGTERM", async () => {
    const { pod, conf, sock } = await speakerPod("good");
    const speaker = pod.start("bgp-speaker");
    try {
      expect(
        await waitUntil(
          () => speaker.lastLines().includes("waiting for the controller's BIRD config"),
          10_000,
        ),
      ).toBe(true);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(speaker.status()).toBeUndefined();
      writeFileSync(conf, GOOD);
      const status = async () => (await ns.exec("birdc", ["-s", sock, "show", "status"])).stdout;
      expect(
        await waitUntil(async () => (await status()).includes("Daemon is up and running"), 15_000, 200),
      ).toBe(true);
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

  /** A config file whose health port is `port` (the controller's /prestop). */
  function configFor(port: number): string {
    const file = join(lab.dir, `config-${port}.json`);
    const config = lbConfigSchema.parse({
      routingMode: "bgp",
      podCidr: "10.244.0.0/16",
      vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
      bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
      ports: { health: port, metrics: port === 9150 ? 9149 : 9150 },
    });
    writeFileSync(file, JSON.stringify(config));
    return file;
  }

  /** Runs the withdraw command against the controller's real HTTP server on loopback, draining with `drain`. */
  async function withdrawAgainst(drain: () => Promise<void>, ...flags: string[]) {
    server = await startHttpServer(0, { ready: () => true, drain }, new Registry(), "127.0.0.1");
    const port = (server.address() as { port: number }).port;
    const started = Date.now();
    // On the host: the test's HTTP server is on the host's loopback (in the pod both share one).
    const r = await execCommand(bin(LB_COMMANDS.withdraw), ["--config", configFor(port), ...flags], {
      env: { PATH },
      timeoutMs: 30_000,
    });
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
    expect(r.out).toContain('"msg":"withdrawn"');
  });

  it("exits 1 with the controller's message when the withdrawal fails", async () => {
    const r = await withdrawAgainst(() => Promise.reject(new Error("birdc: cannot connect")));
    expect(r.code).toBe(1);
    expect(r.out).toContain("HTTP 500");
    expect(r.out).toContain("birdc: cannot connect");
  });

  it("exits 1 when the controller does not answer in time", async () => {
    const r = await withdrawAgainst(() => new Promise<void>(() => undefined), "--timeout-seconds", "1");
    expect(r.code).toBe(1);
    expect(r.out).toContain("no answer within 1 s");
    expect(r.elapsedMs).toBeLessThan(10_000);
  });

  it("exits 1 when nothing listens, and 2 on a config it cannot read", async () => {
    // In the lab's namespace nothing listens at all.
    const refused = await ns.exec(bin(LB_COMMANDS.withdraw), ["--config", configFor(9151)], {
      env: { PATH },
    });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain("ECONNREFUSED");
    expect(refused.stdout).toContain("is the controller running?");
    const missing = await execCommand(bin(LB_COMMANDS.withdraw), ["--config", join(lab.dir, "none.json")], {
      env: { PATH },
    });
    expect(missing.code).toBe(2);
    expect(missing.stdout).toContain("cannot read the LB config");
  });
});
