// An LB pod in a lab: the image's controller and speaker commands, each as PID 1 of its own PID
// namespace (as in their containers), inside one network namespace (the pod's), sharing a BIRD
// folder (the pod's emptyDir), with the API server reached through an ApiBridge. The failure
// cases of the BGP tests act on it as the kubelet or a fault would: preStop then SIGTERM, SIGKILL
// of a container, SIGSTOP of the BIRD daemon.
import {
  LB_COMMANDS,
  LB_HTTP_PATHS,
  lbConfigSchema,
  type LbConfig,
  type LbConfigInput,
} from "@portable-lb/core/config";
import { lbTerminationGraceS } from "../../../packages/core/src/loadBalancer/podSpec.ts";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { waitUntil } from "../../../packages/providers/src/lab/processes.ts";
import { repoRoot } from "../repoRoot.ts";
import { ApiBridge } from "./apiBridge.ts";
import { getInside } from "./httpClient.ts";
import { NetnsError, type LabNamespace } from "../../../packages/providers/src/lab/netns/netnsLab.ts";
import { startWatched, type WatchedProcess } from "./watchedProcess.ts";

const LB_IMAGE = join(repoRoot(), "lb-image");
const bin = (command: string) => join(LB_IMAGE, "bin", command);
// The launchers start with `#!/usr/bin/env node`: this Node first on PATH, as in the image.
const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;

export interface LbPodOptions {
  /** The pod's network namespace, already plugged into its node's pod bridge. */
  ns: LabNamespace;
  /** The pod name (POD_NAME: its leader-election identity and Event target). */
  name: string;
  podIp: string;
  /** HOST_IP: the BGP next hop. */
  nodeIp: string;
  config: LbConfigInput;
  /** Where the pod's files and logs go (the lab's folder). */
  dir: string;
  /** The test's admin kubeconfig; the pod reaches the same API server through a bridge. */
  kubeconfig: string;
  /** POD_NAMESPACE */
  namespace: string;
}

export class LbPod {
  readonly o: LbPodOptions;
  readonly dir: string;
  readonly configFile: string;
  /** The config as the pod's processes read it (defaults filled in). */
  readonly #config: LbConfig;
  readonly #bridge: ApiBridge;
  controller: WatchedProcess | undefined;
  speaker: WatchedProcess | undefined;

  private constructor(o: LbPodOptions, bridge: ApiBridge) {
    this.o = o;
    this.#bridge = bridge;
    this.dir = join(o.dir, o.name);
    this.configFile = join(this.dir, "config.json");
    this.#config = lbConfigSchema.parse(o.config);
  }

  static async create(o: LbPodOptions): Promise<LbPod> {
    const pod = new LbPod(o, await ApiBridge.open(o.ns, o.kubeconfig));
    mkdirSync(join(pod.dir, "bird"), { recursive: true });
    writeFileSync(pod.configFile, JSON.stringify(o.config));
    return pod;
  }

  get birdDir(): string {
    return join(this.dir, "bird");
  }

  /** Starts both containers (again); resolves once the controller listens on its health port. */
  async start(healthPort: number): Promise<void> {
    await this.#network(true);
    const env = {
      PATH,
      KUBECONFIG: this.#bridge.kubeconfigFile,
      POD_NAMESPACE: this.o.namespace,
      POD_NAME: this.o.name,
      POD_IP: this.o.podIp,
      HOST_IP: this.o.nodeIp,
      PORTABLE_LB_BIRD_DIR: this.birdDir,
    };
    this.controller = startWatched(
      this.o.ns,
      this.dir,
      "controller",
      [bin(LB_COMMANDS.controller), "--config", this.configFile],
      { env, asPid1: true },
    );
    this.startSpeaker();
    const controller = this.controller;
    const up = await waitUntil(
      async () => controller.status() !== undefined || (await this.o.ns.listening(healthPort)),
      30_000,
    );
    if (!up || controller.status())
      throw new NetnsError(`${this.o.name}: the controller did not start:\n${controller.lastLines()}`);
  }

  startSpeaker(): void {
    this.speaker = startWatched(
      this.o.ns,
      this.dir,
      "speaker",
      [
        bin(LB_COMMANDS.speaker),
        ...["--config", join(this.birdDir, "bird.conf"), "--socket", join(this.birdDir, "bird.ctl")],
      ],
      { env: { PATH }, asPid1: true },
    );
  }

  /**
   * The kubelet's graceful stop: both containers' preStop hooks at once (the controller's httpGet
   * /prestop, the speaker's `portable-lb-withdraw`), then SIGTERM to both; once both have exited,
   * the pod's network goes (its sandbox is torn down), so whatever still reaches it is lost.
   */
  async stopGracefully(): Promise<void> {
    const [pre] = await Promise.all([
      this.o.ns.exec(
        bin(LB_COMMANDS.withdraw),
        ["--port", String(this.#config.ports.health), "--run-dir", this.birdDir],
        {
          env: { PATH },
          timeoutMs: 30_000,
        },
      ),
      this.get(this.#config.ports.health, LB_HTTP_PATHS.prestop),
    ]);
    if (pre.code !== 0) throw new NetnsError(`${this.o.name}: preStop failed: ${pre.stderr}${pre.stdout}`);
    const graceMs = lbTerminationGraceS(this.#config) * 1000;
    const containers = [this.speaker, this.controller].filter((c) => c !== undefined);
    const exits = await Promise.all(containers.map((c) => c.signal("SIGTERM", graceMs)));
    if (exits.includes(undefined))
      throw new NetnsError(`${this.o.name}: still running after its grace period`);
    await this.#network(false);
  }

  /**
   * The pod's network as its sandbox has it: present, or gone (every packet dropped, as when the
   * kubelet deletes the network namespace; the namespace itself stays, for the next start).
   */
  async #network(present: boolean): Promise<void> {
    const table = "table inet lab_sandbox_gone";
    const gone = [
      `${table} {`,
      "  chain in { type filter hook prerouting priority -400; policy drop; }",
      "  chain out { type filter hook output priority -400; policy drop; }",
      "}",
    ];
    // Declaring the table first makes its deletion idempotent.
    const script = present ? [table, `delete ${table}`] : gone;
    const r = await this.o.ns.exec("nft", ["-f", "-"], { input: `${script.join("\n")}\n` });
    if (r.code !== 0) throw new NetnsError(`${this.o.name}: nft: ${r.stderr}`);
  }

  /** GET http://127.0.0.1:<port><path> from inside the pod, where its ports are. */
  get(port: number, path: string): Promise<{ status: number; body: string }> {
    return getInside(this.o.ns, port, path);
  }

  /** BIRD's answer to a birdc command; "" while BIRD is not up (no socket yet, or restarting). */
  async birdc(...args: string[]): Promise<string> {
    const out = await this.o.ns.exec("birdc", ["-s", join(this.birdDir, "bird.ctl"), ...args]);
    return out.code === 0 ? out.stdout : "";
  }

  /** How many of BIRD's BFD sessions are Up (fast failure detection needs them, not just BGP). */
  async bfdSessionsUp(): Promise<number> {
    return (await this.birdc("show", "bfd", "sessions")).split("\n").filter((l) => /\sUp\s/.test(l)).length;
  }

  /** The pid of the BIRD daemon the speaker runs. */
  birdPid(): number {
    const out = execFileSync("pgrep", ["-f", `^bird -f -c ${join(this.birdDir, "bird.conf")}`], {
      encoding: "utf8",
    });
    return Number(out.trim().split("\n")[0]);
  }

  /** Ensures both containers are gone (SIGKILL) and closes the API bridge. */
  async destroy(): Promise<void> {
    await Promise.all([this.speaker?.kill(), this.controller?.kill()]);
    await this.#bridge.close();
  }
}
