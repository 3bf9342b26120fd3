// An LB pod in a lab: the pod spec the LoadBalancer component renders (lbPodSpec) for the given
// config, run in the pod's network namespace from the LB image under runc (DeployedPod): the image's
// controller and speaker commands with the containers' user, capabilities, no_new_privs, read-only
// root and volumes, the API server reached through an ApiBridge. The failure cases of the BGP tests
// act on it as the kubelet or a fault would: preStop hooks then SIGTERM, SIGKILL of a container,
// SIGSTOP of the BIRD daemon.
import { LB_PATHS, lbConfigSchema, type LbConfig, type LbConfigInput } from "@portable-lb/core/config";
import { lbPodSpec, lbTerminationGraceS } from "../../../packages/core/src/loadBalancer/podSpec.ts";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type LabNamespace, NetnsError, waitUntil } from "@portable-lb/lab";
import { ApiBridge } from "./apiBridge.ts";
import { DeployedPod } from "./deployedPod.ts";
import { getInside } from "./httpClient.ts";
import type { WatchedProcess } from "./watchedProcess.ts";
import { parseBirdBfdSessions, upPeers } from "../bfdSessions.ts";
import { exportedPerSession, parseProtocols } from "../../../lb-image/src/bgp/birdOutput.ts";

const CONFIG_MAP = "portable-lb-controller-config";
const PASSWORD_SECRET = "portable-lb-controller-bgp";
/**
 * Where the controller finds the API server's credentials. A cluster's admission adds a
 * ServiceAccount token volume to the pod; the tests mount a kubeconfig (of the bridged API server)
 * in its place.
 */
const API_CREDENTIALS = "/var/run/secrets/portable-lb-tests/kubeconfig";
const BRIDGE_PORT = 6443;

/** The LB pod spec the LoadBalancer component renders for `config` (names as a test's). */
export function renderedLbPodSpec(config: LbConfig, bgpPassword = false) {
  return lbPodSpec({
    config,
    image: "portable-lb",
    serviceAccountName: "portable-lb-controller",
    priorityClassName: "portable-lb-dataplane",
    nodeSelector: {},
    configMapName: CONFIG_MAP,
    ...(bgpPassword && { bgpPasswordSecret: PASSWORD_SECRET }),
  });
}

export interface LbPodOptions {
  /** The pod's network namespace, already plugged into its node's pod bridge. */
  ns: LabNamespace;
  /** The pod name (POD_NAME: its leader-election identity and Event target). */
  name: string;
  /** The node it runs on (NODE_NAME). */
  nodeName: string;
  podIp: string;
  /** HOST_IP: the BGP next hop. */
  nodeIp: string;
  config: LbConfigInput;
  /** The BGP password: given, the pod gets it from a Secret, as the LoadBalancer component renders it. */
  bgpPassword?: string;
  /** Where the pod's files and logs go (the lab's folder). */
  dir: string;
  /** The test's admin kubeconfig; the pod reaches the same API server through a bridge. */
  kubeconfig: string;
  /** POD_NAMESPACE */
  namespace: string;
}

export class LbPod {
  readonly o: LbPodOptions;
  /** The config as the pod's processes read it (defaults filled in). */
  readonly config: LbConfig;
  readonly pod: DeployedPod;
  readonly #bridge: ApiBridge;
  controller: WatchedProcess | undefined;
  speaker: WatchedProcess | undefined;

  private constructor(o: LbPodOptions, config: LbConfig, pod: DeployedPod, bridge: ApiBridge) {
    this.o = o;
    this.config = config;
    this.pod = pod;
    this.#bridge = bridge;
  }

  static async create(o: LbPodOptions): Promise<LbPod> {
    const parsed = lbConfigSchema.parse(o.config);
    // As the LoadBalancer component renders it: the password file is the Secret's mount.
    const config =
      o.bgpPassword !== undefined && parsed.bgp
        ? { ...parsed, bgp: { ...parsed.bgp, passwordFile: LB_PATHS.bgpPasswordFile } }
        : parsed;
    const spec = renderedLbPodSpec(config, o.bgpPassword !== undefined);
    const bridge = await ApiBridge.open(o.ns, o.kubeconfig, BRIDGE_PORT);
    try {
      const pod = await DeployedPod.create({
        name: o.name,
        namespace: o.namespace,
        spec,
        ns: o.ns,
        nodeName: o.nodeName,
        dir: join(o.dir, o.name),
        runtime: { podIP: o.podIp, hostIP: o.nodeIp },
        configMaps: { [CONFIG_MAP]: { "config.json": JSON.stringify(config) } },
        ...(o.bgpPassword !== undefined && { secrets: { [PASSWORD_SECRET]: { password: o.bgpPassword } } }),
        apiServer: { host: "127.0.0.1", port: BRIDGE_PORT },
      });
      // Outside /tmp, which the controller's emptyDir hides.
      copyFileSync(bridge.kubeconfigFile, join(pod.o.dir, "api-credentials"));
      return new LbPod(o, config, pod, bridge);
    } catch (err) {
      await bridge.close();
      throw err;
    }
  }

  /** BIRD's folder (the pod's bird-run emptyDir) on this machine. */
  get birdDir(): string {
    return this.pod.volumePath("bird-run");
  }

  /** Starts both containers (again); resolves once the controller listens on its health port. */
  async start(): Promise<void> {
    await this.#network(true);
    const controller = this.pod.start("controller", {
      env: { KUBECONFIG: API_CREDENTIALS },
      mounts: [{ source: join(this.pod.o.dir, "api-credentials"), target: API_CREDENTIALS }],
    });
    this.controller = controller;
    this.startSpeaker();
    const up = await waitUntil(
      async () => controller.status() !== undefined || (await this.o.ns.listening(this.config.ports.health)),
      30_000,
    );
    if (!up || controller.status())
      throw new NetnsError(`${this.o.name}: the controller did not start:\n${controller.lastLines()}`);
  }

  startSpeaker(): void {
    this.speaker = this.pod.start("bgp-speaker");
  }

  /**
   * The kubelet's graceful stop: each container's preStop hook, then its SIGTERM, the containers side
   * by side within one grace period (a hook that fails or returns early lets its container stop at
   * once, as on a real node). Once both have exited the pod's network goes (its sandbox is torn
   * down), so whatever still reaches it is lost. Returns the hooks that failed (the kubelet's
   * FailedPreStopHook: it goes on anyway).
   */
  async stopGracefully(): Promise<string[]> {
    const deadline = Date.now() + lbTerminationGraceS(this.config) * 1000;
    const containers = { "bgp-speaker": this.speaker, controller: this.controller };
    const stopped = await Promise.all(
      Object.entries(containers).map(async ([name, proc]) => {
        const hook = await this.pod.preStop(name, Math.max(0, deadline - Date.now()));
        // As the kubelet: SIGTERM gets at least 2 s even when the hook used up the grace period.
        const exit = await proc?.signal("SIGTERM", Math.max(2_000, deadline - Date.now()));
        return { failed: hook && !hook.ok ? [`${name}: ${hook.detail}`] : [], running: proc && !exit };
      }),
    );
    if (stopped.some((s) => s.running))
      throw new NetnsError(`${this.o.name}: still running after its grace period`);
    await this.#network(false);
    return stopped.flatMap((s) => s.failed);
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

  /** The peers BIRD's BFD sessions are Up with (fast failure detection needs them, not just BGP). */
  async bfdUpPeers(): Promise<string[]> {
    return upPeers(parseBirdBfdSessions(await this.birdc("show", "bfd", "sessions")));
  }

  /**
   * Whether the router's paths through this pod are protected by BFD: a BGP session Established to
   * each reflector, BFD Up to each, and the VIPs exported on each session.
   */
  async bfdProtected(): Promise<boolean> {
    const reflectors = [...(this.config.bgp?.routeReflectors ?? [])].sort();
    const [protocols, bfd] = await Promise.all([this.birdc("show", "protocols", "all"), this.bfdUpPeers()]);
    const sessions = parseProtocols(protocols);
    const exported = exportedPerSession(protocols);
    return (
      sessions.length === reflectors.length &&
      sessions.every((s) => s.established && (exported.get(s.name) ?? 0) > 0) &&
      bfd.join() === reflectors.join()
    );
  }

  /** The pid of the BIRD daemon the speaker container runs (a child of its PID 1). */
  async birdPid(): Promise<number> {
    const pid1 = await this.speaker?.mainPid();
    const children =
      pid1 === undefined ? [] : readFileSync(`/proc/${pid1}/task/${pid1}/children`, "utf8").trim().split(" ");
    const bird = children.find((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "bird";
      } catch {
        return false;
      }
    });
    if (bird === undefined) throw new NetnsError(`${this.o.name}: the speaker runs no BIRD`);
    return Number(bird);
  }

  /** Ensures both containers are gone (SIGKILL) and closes the API bridge. */
  async destroy(): Promise<void> {
    await this.pod.kill();
    await this.#bridge.close();
  }
}
