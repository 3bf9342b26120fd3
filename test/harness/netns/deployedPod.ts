// A pod of a rendered spec (lbPodSpec, routeReflectorPodSpec, …) run in a lab namespace from the LB
// image this checkout built, each container under runc as a node's runtime runs it (runcContainer):
// the spec's command, user, capabilities, no_new_privs, read-only root, memory limit, the pod's
// sysctls, and its volumes as host folders of the pod (ConfigMaps and Secrets given by the test,
// emptyDirs, projected), the downward API's values from the test. So the tests and benchmarks run
// our daemons with exactly what the image and the manifests give them, never as root with every
// capability. Nothing here restates the spec: change the manifest and the tests follow.
import type { V1Container, V1Pod, V1PodSpec } from "@kubernetes/client-node";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ExecResult, type LabNamespace, NetnsError } from "@portable-lb/lab";
import { lbImageRootfs } from "../oci/lbImageRootfs.ts";
import type { UnpackedImage } from "../oci/ociArchive.ts";
import { prepareVolume } from "../oci/podVolumes.ts";
import { containerSecurity, runcContainers, type ContainerSecurity } from "../oci/runcContainer.ts";
import { runContainer, type RuncProcess } from "../oci/runcProcess.ts";
import { getInside } from "./httpClient.ts";
import type { WatchedProcess } from "./watchedProcess.ts";

export interface DeployedPodOptions {
  name: string;
  namespace: string;
  /** The rendered pod spec, as the manifest carries it. */
  spec: object;
  /** The pod's network namespace; a hostNetwork pod's is its node's. */
  ns: LabNamespace;
  nodeName: string;
  /** The pod's folder: its volumes, bundles, runc state and logs. */
  dir: string;
  runtime: { podIP?: string; hostIP: string };
  /** Data of the ConfigMaps and Secrets its volumes name, by name. */
  configMaps?: Record<string, Record<string, string>>;
  secrets?: Record<string, Record<string, string>>;
  /** The API server as in-cluster clients find it (KUBERNETES_SERVICE_HOST/PORT). */
  apiServer?: { host: string; port: number };
}

/** What a test adds to a container beyond its spec, as a cluster would (API credentials). */
export interface ContainerExtras {
  env?: Record<string, string>;
  /** Host files or folders mounted read-only in the container. */
  mounts?: { source: string; target: string }[];
}

export interface HandlerResult {
  ok: boolean;
  /** Why it failed (or the exec output), as the kubelet's event says. */
  detail: string;
}

/** Pods not yet removed, so a test's clean-up finds every container this worker started. */
const live = new Set<DeployedPod>();

export class DeployedPod {
  readonly o: DeployedPodOptions;
  readonly pod: V1Pod;
  readonly #image: UnpackedImage;
  readonly #running = new Map<string, RuncProcess>();

  private constructor(o: DeployedPodOptions, pod: V1Pod, image: UnpackedImage) {
    this.o = o;
    this.pod = pod;
    this.#image = image;
  }

  /** Prepares the pod's volumes and files (and unpacks the image on first use); starts nothing. */
  static async create(o: DeployedPodOptions): Promise<DeployedPod> {
    const image = await lbImageRootfs();
    mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    const pod: V1Pod = {
      metadata: { name: o.name, namespace: o.namespace, uid: randomUUID() },
      spec: { ...(o.spec as V1PodSpec), nodeName: o.nodeName },
    };
    const deployed = new DeployedPod(o, pod, image);
    for (const v of pod.spec!.volumes ?? []) prepareVolume(deployed.volumePath(v.name), o.name, v, o);
    writeFileSync(deployed.#hostsFile, deployed.#hosts());
    live.add(deployed);
    return deployed;
  }

  get #hostNetwork(): boolean {
    return this.pod.spec!.hostNetwork === true;
  }

  get #hostname(): string {
    return this.#hostNetwork ? this.o.nodeName : this.o.name;
  }

  get #ip(): string {
    return this.o.runtime.podIP ?? this.o.runtime.hostIP;
  }

  get #runcRoot(): string {
    return join(this.o.dir, "runc");
  }

  get #hostsFile(): string {
    return join(this.o.dir, "etc-hosts");
  }

  /** The /etc/hosts the kubelet writes for a pod: localhost, and the pod's own name at its address. */
  #hosts(): string {
    return [
      "127.0.0.1\tlocalhost",
      "::1\tlocalhost ip6-localhost ip6-loopback",
      `${this.#ip}\t${this.#hostname}`,
      "",
    ].join("\n");
  }

  /** Where volume `name` is on this machine (a test writes an emptyDir's files there). */
  volumePath(name: string): string {
    if (!this.pod.spec!.volumes?.some((v) => v.name === name))
      throw new Error(`pod ${this.o.name}: no volume "${name}"`);
    return join(this.o.dir, "volumes", name);
  }

  container(name: string): V1Container {
    const c = this.pod.spec!.containers.find((x) => x.name === name);
    if (!c) throw new Error(`pod ${this.o.name}: no container "${name}"`);
    return c;
  }

  /** The user and capabilities container `name` runs with (the spec read as the runtime reads it). */
  security(name: string): ContainerSecurity {
    return containerSecurity(this.container(name), this.#image.config);
  }

  /** The downward API's values for this pod. */
  #fields(): Record<string, string> {
    return {
      "metadata.name": this.o.name,
      "metadata.namespace": this.o.namespace,
      "metadata.uid": this.pod.metadata!.uid!,
      "spec.nodeName": this.o.nodeName,
      "spec.serviceAccountName": this.pod.spec!.serviceAccountName ?? "default",
      "status.podIP": this.#ip,
      "status.podIPs": this.#ip,
      "status.hostIP": this.o.runtime.hostIP,
      "status.hostIPs": this.o.runtime.hostIP,
    };
  }

  /**
   * Starts container `name` (again) under runc, its init PID 1 of its own namespaces in the pod's
   * network namespace; its output goes to `<dir>/<ns>-<name>.log`.
   */
  start(name: string, extras: ContainerExtras = {}): WatchedProcess {
    const previous = this.#running.get(name);
    if (previous && !previous.status())
      throw new NetnsError(`pod ${this.o.name}: container ${name} is running already`);
    const api = this.o.apiServer ?? { host: "127.0.0.1", port: 6443 };
    const proc = runContainer(
      {
        // Unique on the machine (runc's cgroups are named by it): the namespace is the lab's own.
        id: `${this.o.ns.netns}-${this.o.name}-${name}`,
        container: this.container(name),
        image: this.#image,
        netnsPath: `/run/netns/${this.o.ns.netns}`,
        hostname: this.#hostname,
        volumes: Object.fromEntries(
          (this.pod.spec!.volumes ?? []).map((v) => [v.name, this.volumePath(v.name)]),
        ),
        fields: this.#fields(),
        env: {
          HOSTNAME: this.#hostname,
          KUBERNETES_SERVICE_HOST: api.host,
          KUBERNETES_SERVICE_PORT: String(api.port),
          ...extras.env,
        },
        files: {
          [this.#hostsFile]: "/etc/hosts",
          ...Object.fromEntries((extras.mounts ?? []).map((m) => [m.source, m.target])),
        },
        sysctls: Object.fromEntries(
          (this.pod.spec!.securityContext?.sysctls ?? []).map((s) => [s.name, s.value]),
        ),
      },
      {
        rootfs: this.#image.rootfs,
        dir: join(this.o.dir, "containers", name),
        root: this.#runcRoot,
        logFile: join(this.o.dir, `${this.o.ns.name}-${name}.log`),
      },
    );
    this.#running.set(name, proc);
    return proc;
  }

  #runningContainer(name: string): RuncProcess {
    const proc = this.#running.get(name);
    if (!proc || proc.status()) throw new NetnsError(`pod ${this.o.name}: container ${name} is not running`);
    return proc;
  }

  /** Runs `argv` inside running container `name` (`runc exec`), as its user and capabilities: an exec hook or probe. */
  exec(name: string, argv: string[], timeoutMs = 30_000): Promise<ExecResult> {
    return this.#runningContainer(name).exec(argv, timeoutMs);
  }

  /**
   * Runs container `name`'s preStop hook as the kubelet does (exec inside the container, httpGet to
   * the pod's address from its network namespace), bounded by `timeoutMs`; undefined when it has
   * none or does not run. A failed hook does not stop the termination: the kubelet reports it
   * (FailedPreStopHook) and sends SIGTERM anyway.
   */
  async preStop(name: string, timeoutMs: number): Promise<HandlerResult | undefined> {
    const c = this.container(name);
    const hook = c.lifecycle?.preStop;
    const proc = this.#running.get(name);
    if (!hook || !proc || proc.status()) return undefined;
    if (hook.exec) {
      const r = await proc.exec(hook.exec.command ?? [], timeoutMs);
      const output = r.stdout + r.stderr;
      if (r.timedOut) return { ok: false, detail: `command timed out after ${timeoutMs / 1000}s` };
      return { ok: r.code === 0, detail: r.code === 0 ? output : `exit ${r.code}: ${output.trim()}` };
    }
    if (hook.httpGet) {
      const { port: named, path = "/" } = hook.httpGet;
      const port =
        typeof named === "number" || /^[0-9]+$/.test(named)
          ? Number(named)
          : c.ports?.find((p) => p.name === named)?.containerPort;
      if (port === undefined) return { ok: false, detail: `no container port named "${named}"` };
      // The kubelet counts 200-399 as success; a refused or timed-out request fails the hook.
      const answer = await getInside(this.o.ns, port, path, {
        host: hook.httpGet.host || this.#ip,
        // curl takes --max-time 0 for no limit at all.
        timeoutMs: Math.max(timeoutMs, 100),
      }).catch((err: Error) => err);
      if (answer instanceof Error) return { ok: false, detail: answer.message };
      const ok = answer.status >= 200 && answer.status < 400;
      return { ok, detail: ok ? `HTTP ${answer.status}` : `HTTP status ${answer.status}` };
    }
    return { ok: false, detail: "the hook has no exec or httpGet" };
  }

  /** Kills every container still running and deletes each by id; throws if runc still holds one. */
  async kill(): Promise<void> {
    await Promise.all([...this.#running.values()].map((p) => p.kill()));
    const left = await runcContainers(this.#runcRoot).catch(() => []);
    if (left.length) throw new NetnsError(`pod ${this.o.name}: runc still holds ${left.join(", ")}`);
    live.delete(this);
  }
}

/** Kills and deletes the containers of every pod this worker created and has not removed yet. */
export async function removeDeployedPods(): Promise<void> {
  await Promise.all([...live].map((p) => p.kill()));
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
