// A pod of a rendered spec (lbPodSpec, routeReflectorPodSpec, …) run in a lab namespace the way the
// lab's kubelet stand-in runs it, without the API: the agent's own pure parts build each container
// from the spec (volumes prepared from the given ConfigMaps and Secrets, environment, user, groups,
// capability bounding set, no_new_privs, bind mounts, read-only root), and its launch script starts
// it as PID 1 of its own PID, mount and UTS namespaces, dropping privileges with setpriv. So the
// tests and benchmarks run our daemons with exactly what the manifests give them, never as root with
// every capability. Nothing here restates the spec: change the manifest and the tests follow.
import type { V1Container, V1Pod, V1PodSpec } from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join } from "node:path";
import {
  containerFiles,
  containerSpec,
  execInContainerArgs,
  findTools,
  type HandlerResult,
  isExecutable,
  launchScript,
  type MountSpec,
  podHostname,
  podHostsFile,
  type PodRuntimeFields,
  type PreparedVolume,
  prepareVolumes,
  processSecurity,
  type ProcessSecurity,
  REGISTRY_DIR,
  removeUnusedMountpoints,
  resolveCommand,
  runHandler,
} from "@portable-lb/lab/agent";
import { execCommand, type ExecResult, type LabNamespace, NetnsError } from "@portable-lb/lab";
import { repoRoot } from "../repoRoot.ts";
import { startWatched, type WatchedProcess } from "./watchedProcess.ts";

// Looked up once: findTools runs `command -v` synchronously, which would stall a benchmark's timing.
let found: ReturnType<typeof findTools> | undefined;
const tools = () => (found ??= findTools(process.env.PATH ?? ""));

/**
 * The PATH the LB image's containers get here: its commands (lb-image/bin, which the image build
 * links into /usr/local/bin), this Node (their `#!/usr/bin/env node`), then this machine's tools
 * (scripts/with-tools puts the image's BIRD build first).
 */
export const IMAGE_PATH = [
  join(repoRoot(), "lb-image", "bin"),
  dirname(process.execPath),
  process.env.PATH ?? "",
].join(":");

export interface DeployedPodOptions {
  name: string;
  namespace: string;
  /** The rendered pod spec, as the manifest carries it. */
  spec: object;
  /** The pod's network namespace; a hostNetwork pod's is its node's. */
  ns: LabNamespace;
  nodeName: string;
  /** The pod's folder: its volumes, scripts and logs. */
  dir: string;
  runtime: { podIP?: string; hostIP: string };
  /** Data of the ConfigMaps and Secrets its volumes name, by name. */
  configMaps?: Record<string, Record<string, string>>;
  secrets?: Record<string, Record<string, string>>;
  /** The PATH containers get (no image brings one): where the image's commands and tools are. */
  path: string;
  /** The API server as in-cluster clients find it (KUBERNETES_SERVICE_HOST/PORT). */
  apiServer?: { host: string; port: number };
}

/** What a test adds to a container beyond its spec, as a cluster would (API credentials). */
export interface ContainerExtras {
  env?: Record<string, string>;
  mounts?: MountSpec[];
}

interface Running {
  proc: WatchedProcess;
  env: Record<string, string>;
  setpriv: string[];
  mountTargets: string[];
}

export class DeployedPod {
  readonly o: DeployedPodOptions;
  readonly pod: V1Pod;
  readonly #volumes: Map<string, PreparedVolume>;
  readonly #running = new Map<string, Running>();

  private constructor(o: DeployedPodOptions, pod: V1Pod, volumes: Map<string, PreparedVolume>) {
    this.o = o;
    this.pod = pod;
    this.#volumes = volumes;
  }

  /** Prepares the pod's volumes and files; starts nothing. */
  static async create(o: DeployedPodOptions): Promise<DeployedPod> {
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    const pod: V1Pod = {
      metadata: { name: o.name, namespace: o.namespace, uid: randomUUID() },
      spec: { ...(o.spec as V1PodSpec), nodeName: o.nodeName },
    };
    const { volumes } = await prepareVolumes(o.dir, o.dir, {
      pod,
      runtime: runtimeFields(o),
      allocatable: allocatable(),
      configMap: (name) => {
        const data = o.configMaps?.[name];
        return data && { data };
      },
      secret: (name) => {
        const stringData = o.secrets?.[name];
        return stringData && { stringData };
      },
      token: () => Promise.reject(new Error("the tests' pods get no ServiceAccount tokens")),
    });
    if (!pod.spec!.hostNetwork)
      writeFileSync(join(o.dir, "etc-hosts"), podHostsFile(pod, o.runtime.podIP, o.nodeName));
    return new DeployedPod(o, pod, volumes);
  }

  /** Where volume `name` is on this machine (a test writes an emptyDir's files there). */
  volumePath(name: string): string {
    const v = this.#volumes.get(name);
    if (!v) throw new Error(`pod ${this.o.name}: no volume "${name}"`);
    return v.path;
  }

  container(name: string): V1Container {
    const c = this.pod.spec!.containers.find((x) => x.name === name);
    if (!c) throw new Error(`pod ${this.o.name}: no container "${name}"`);
    return c;
  }

  /** The user, groups and capabilities container `name` runs with (the agent's reading of the spec). */
  security(name: string): ProcessSecurity {
    return processSecurity(this.pod, this.container(name));
  }

  /** Starts container `name` (again), as PID 1 of its own namespaces; its output goes to `<dir>/<ns>-<name>.log`. */
  start(name: string, extras: ContainerExtras = {}): WatchedProcess {
    const t = tools();
    const spec = containerSpec({
      pod: this.pod,
      container: this.container(name),
      podDir: this.o.dir,
      volumes: this.#volumes,
      runtime: runtimeFields(this.o),
      configMap: () => undefined,
      secret: () => undefined,
      allocatable: allocatable(),
      apiServer: this.o.apiServer ?? { host: "127.0.0.1", port: 6443 },
      agentPath: this.o.path,
      hostname: podHostname(this.pod, this.o.nodeName),
    });
    const mounts = [...spec.mounts, ...(extras.mounts ?? [])];
    const env = { ...spec.env, ...extras.env };
    const mountTargets = mounts.map((m) => m.target);
    const argv = this.#resolved(name, spec.argv, env, mountTargets);
    const files = containerFiles(this.o.dir, name);
    writeFileSync(
      files.script,
      launchScript({
        tools: t,
        registryDir: REGISTRY_DIR,
        errorFile: files.error,
        mounts,
        ownProc: true,
        hostname: podHostname(this.pod, this.o.nodeName),
        readOnlyRoot: spec.readOnlyRoot,
        setpriv: spec.setpriv,
        argv,
      }),
      { mode: 0o700 },
    );
    mkdirSync(REGISTRY_DIR, { recursive: true });
    const proc = startWatched(
      this.o.ns,
      this.o.dir,
      name,
      [t.unshare, "--mount", "--propagation", "private", "--uts", "--", t.sh, files.script],
      { env, inheritEnv: false, asPid1: true },
    );
    this.#running.set(name, { proc, env, setpriv: spec.setpriv, mountTargets });
    return proc;
  }

  /** `argv` with its command found as the agent finds it (no image: on this machine's PATH). */
  #resolved(name: string, argv: string[], env: Record<string, string>, mountTargets: string[]): string[] {
    const [argv0, ...rest] = argv;
    if (argv0 === undefined) throw new NetnsError(`pod ${this.o.name}, container ${name}: no command`);
    const found = resolveCommand(argv0, {
      containerPath: env.PATH ?? this.o.path,
      agentPath: this.o.path,
      mountTargets,
      isExecutable,
    });
    if ("error" in found) throw new NetnsError(`pod ${this.o.name}, container ${name}: ${found.error}`);
    return [found.path, ...rest];
  }

  /** Runs `argv` inside running container `name`, as its user and capabilities: an exec hook or probe. */
  async exec(name: string, argv: string[], timeoutMs = 30_000): Promise<ExecResult> {
    const running = this.#running.get(name);
    const pid = await running?.proc.mainPid();
    if (!running || pid === undefined)
      throw new NetnsError(`pod ${this.o.name}: container ${name} is not running`);
    const command = this.#resolved(name, argv, running.env, running.mountTargets);
    const [nsenter, ...args] = execInContainerArgs(tools(), pid, running.setpriv, command);
    return execCommand(nsenter!, args, { env: running.env, timeoutMs });
  }

  /**
   * Runs container `name`'s preStop hook as the kubelet does (exec inside the container, httpGet to
   * the pod's address), bounded by `timeoutMs`; undefined when it has none. A failed hook does not
   * stop the termination: the kubelet reports it (FailedPreStopHook) and sends SIGTERM anyway.
   */
  async preStop(name: string, timeoutMs: number): Promise<HandlerResult | undefined> {
    const c = this.container(name);
    const hook = c.lifecycle?.preStop;
    const pid = await this.#running.get(name)?.proc.mainPid();
    if (!hook || pid === undefined) return undefined;
    return runHandler(
      hook,
      {
        pid,
        podIP: runtimeFields(this.o).podIP,
        ports: c.ports ?? [],
        tools: tools(),
        exec: async (argv, ms) => {
          const r = await this.exec(name, argv, ms);
          return { code: r.code, output: r.stdout + r.stderr };
        },
      },
      timeoutMs,
    );
  }

  /** Kills every container still running. */
  async kill(): Promise<void> {
    await Promise.all([...this.#running.values()].map((r) => r.proc.kill()));
  }
}

/** A running process's user and capability sets, from /proc (names as in a securityContext). */
export function processPrivileges(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, "m").exec(status)?.[1] ?? "";
  const capabilities = (name: string) => {
    const decoded = execFileSync("capsh", [`--decode=${field(name)}`], { encoding: "utf8" });
    const names = decoded.trim().split("=")[1] ?? "";
    return names === ""
      ? []
      : names
          .split(",")
          .map((c) => c.replace(/^cap_/, "").toUpperCase())
          .sort();
  };
  return {
    uid: Number(field("Uid").split(/\s+/)[1]),
    effective: capabilities("CapEff"),
    bounding: capabilities("CapBnd"),
    inheritable: capabilities("CapInh"),
    ambient: capabilities("CapAmb"),
    noNewPrivs: field("NoNewPrivs") === "1",
  };
}

/** Removes the mountpoints containers created on this machine's filesystem that nothing mounts any more. */
export async function removeContainerMountpoints(): Promise<void> {
  await removeUnusedMountpoints(tools().flock);
}

function runtimeFields(o: DeployedPodOptions): PodRuntimeFields {
  const ip = o.runtime.podIP ?? o.runtime.hostIP;
  return { podIP: ip, podIPs: [ip], hostIP: o.runtime.hostIP, hostIPs: [o.runtime.hostIP] };
}

function allocatable() {
  return { cpu: cpus().length, memory: totalmem(), "ephemeral-storage": 0 };
}
