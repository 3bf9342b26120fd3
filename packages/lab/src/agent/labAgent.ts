// The lab node agent: a kubelet stand-in for one node of the lab (a network namespace), running that
// node's pods as processes. Start-up: register the Node and keep it alive, adopt what a previous run
// of the agent left, wait for the controller-manager's podCIDR, make the pod bridge, then follow the
// node's Pods through an informer (field selector spec.nodeName) and hand each to its pod worker.
// Stop: every pod is stopped as a deletion would stop it, the sandboxes are removed, and the Node is
// deleted (or, with keepNode, left not ready).
import {
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  VersionApi,
  Watch,
  type V1Pod,
} from "@kubernetes/client-node";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import type { AgentOptions } from "./agentOptions.ts";
import { RestartBackOff } from "./backoff.ts";
import { EventRecorder } from "./events.ts";
import { Informer } from "./informer.ts";
import { Ipam } from "./ipam.ts";
import { REGISTRY_DIR, removeUnusedMountpoints } from "./mountpoints.ts";
import { NodeRegistration } from "./nodeRegistration.ts";
import { PodNetwork } from "./podNetwork.ts";
import { loadRecords, podDirName, podsRoot, type PodRecord } from "./podState.ts";
import { PodWorker, type NodeContext, type Tools } from "./podWorker.ts";
import { parseQuantity } from "./quantity.ts";
import { ReferencedObjects } from "./referencedObjects.ts";

const TOOL_NAMES = [
  "ip",
  "unshare",
  "nsenter",
  "setpriv",
  "mount",
  "mkdir",
  "flock",
  "sh",
  "curl",
  "bash",
  "timeout",
] as const;

/** Absolute paths of the host tools the agent runs; throws naming the missing ones. */
export function findTools(path: string): Tools {
  const found: Record<string, string> = {};
  const missing: string[] = [];
  for (const name of TOOL_NAMES) {
    const r = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8", env: { PATH: path } });
    const where = r.stdout.trim();
    if (r.status === 0 && where.startsWith("/")) found[name] = where;
    else missing.push(name);
  }
  if (missing.length) {
    throw new Error(
      `the lab agent needs ${missing.join(", ")} on PATH (Debian packages iproute2, util-linux, curl, bash, coreutils)`,
    );
  }
  return found as unknown as Tools;
}

/** host and port of the kubeconfig's API server: what in-cluster clients in pods are given. */
export function apiServerAddress(kc: KubeConfig): { host: string; port: number } {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error("the kubeconfig has no current cluster");
  const url = new URL(server);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(url.port || (url.protocol === "https:" ? 443 : 80)),
  };
}

export class LabAgent {
  readonly #o: AgentOptions;
  readonly #log: Logger;
  readonly #kc: KubeConfig;
  readonly #core: CoreV1Api;
  readonly #tools: Tools;
  readonly #node: NodeRegistration;
  readonly #objects: ReferencedObjects;
  readonly #workers = new Map<string, PodWorker>();
  /** Pods this agent has deleted, until the watch reports them gone: their late events are ignored. */
  readonly #done = new Set<string>();
  #pods: Informer<V1Pod> | undefined;
  #ctx: NodeContext | undefined;
  #stopping: Promise<void> | undefined;

  private constructor(o: AgentOptions, log: Logger, kc: KubeConfig, tools: Tools, version: string) {
    this.#o = o;
    this.#log = log;
    this.#kc = kc;
    this.#tools = tools;
    this.#core = kc.makeApiClient(CoreV1Api);
    const watch = new Watch(kc);
    this.#node = new NodeRegistration({
      core: this.#core,
      coordination: kc.makeApiClient(CoordinationV1Api),
      watch,
      log,
      id: {
        nodeName: o.nodeName,
        nodeIp: o.nodeIp,
        labels: o.nodeLabels,
        taints: o.nodeTaints,
        capacity: o.capacity,
      },
      version,
    });
    this.#objects = new ReferencedObjects(this.#core, watch, log, (uids) => {
      for (const uid of uids) this.#workers.get(uid)?.trigger();
    });
  }

  /** Checks the host tools and reads the kubeconfig and the API server's version; runs nothing yet. */
  static async create(o: AgentOptions, log: Logger): Promise<LabAgent> {
    const tools = findTools(process.env.PATH ?? "");
    const kc = new KubeConfig();
    kc.loadFromFile(o.kubeconfig);
    mkdirSync(podsRoot(o.stateDir), { recursive: true, mode: 0o700 });
    mkdirSync(o.nodeRoot, { recursive: true });
    mkdirSync(REGISTRY_DIR, { recursive: true });
    const version = (await kc.makeApiClient(VersionApi).getCode()).gitVersion;
    return new LabAgent(o, log, kc, tools, version);
  }

  /** Resolves once the Node is Ready and its pods are followed (or the agent was stopped meanwhile). */
  async run(): Promise<void> {
    const o = this.#o;
    await this.#node.start();
    const records = loadRecords(o.stateDir);
    const podCidr = await this.#node.waitForPodCidr();
    if (this.#stopping) return;
    const network = new PodNetwork(o.podBridge, this.#tools.ip);
    await network.ensureBridge(podCidr);
    const ipam = new Ipam(join(o.stateDir, "ipam.json"), podCidr);
    this.#log.info({ podCidr, bridge: o.podBridge, gateway: network.gateway }, "pod network ready");
    this.#ctx = {
      nodeName: o.nodeName,
      nodeIp: o.nodeIp,
      nodeRoot: o.nodeRoot,
      log: this.#log,
      core: this.#core,
      events: new EventRecorder(this.#core, this.#log, o.nodeName),
      objects: this.#objects,
      network,
      ipam,
      tools: this.#tools,
      apiServer: apiServerAddress(this.#kc),
      allocatable: {
        cpu: parseQuantity(o.capacity.cpu),
        memory: parseQuantity(o.capacity.memory),
        "ephemeral-storage": 0,
      },
      agentPath: process.env.PATH ?? "",
      backoff: new RestartBackOff(),
      cleanMountpoints: async () => {
        const removed = await removeUnusedMountpoints(this.#tools.flock);
        if (removed.length) this.#log.debug({ removed }, "removed unused mountpoints");
      },
    };
    // What the previous run left: its containers are followed again before anything is decided.
    for (const { dir, record } of records) this.#worker(record, dir).adopt();
    // Addresses of pods that have no record any more (a crash between allocation and record).
    for (const owner of ipam.owners()) if (!this.#workers.has(owner)) ipam.release(owner);

    const fieldSelector = `spec.nodeName=${o.nodeName}`;
    this.#pods = new Informer<V1Pod>({
      name: "pods",
      path: "/api/v1/pods",
      watch: new Watch(this.#kc),
      fieldSelector,
      log: this.#log,
      list: () => this.#core.listPodForAllNamespaces({ fieldSelector }),
      onChange: (pod) => (pod ? this.#onPod(pod) : this.#resync()),
    });
    await this.#pods.start();
    if (this.#stopping) return;
    await this.#node.setReadiness({
      ready: true,
      reason: "KubeletReady",
      message: "the lab agent is posting ready status",
    });
    await this.#ctx.cleanMountpoints();
  }

  /** A watch event: hand the pod's latest object to its worker (or a new one). */
  #onPod(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    if (!uid || this.#stopping || !this.#pods?.synced()) return;
    const current = this.#pods.get(pod.metadata!.name!, pod.metadata!.namespace);
    if (this.#done.has(uid)) {
      // Its deletion has reached the cache too: nothing more will come about it.
      if (current?.metadata?.uid !== uid) this.#done.delete(uid);
      return;
    }
    let worker = this.#workers.get(uid);
    if (!worker) {
      if (!current) return; // deleted before we ever ran it
      const record: PodRecord = {
        uid,
        namespace: pod.metadata!.namespace!,
        name: pod.metadata!.name!,
        hostNetwork: pod.spec?.hostNetwork === true,
        containers: {},
      };
      worker = this.#worker(
        record,
        join(podsRoot(this.#o.stateDir), podDirName(record.namespace, record.name, uid)),
      );
    }
    worker.update(current?.metadata?.uid === uid ? current : undefined);
  }

  /** After a complete (re)list: every worker gets its pod (or learns it is gone), new pods get workers. */
  #resync(): void {
    if (this.#stopping || !this.#pods) return;
    const byUid = new Map(this.#pods.list().map((p) => [p.metadata!.uid!, p]));
    for (const [uid, w] of this.#workers) w.update(byUid.get(uid));
    for (const pod of byUid.values()) if (!this.#workers.has(pod.metadata!.uid!)) this.#onPod(pod);
  }

  #worker(record: PodRecord, dir: string): PodWorker {
    const w = new PodWorker(this.#ctx!, dir, record, () => {
      this.#workers.delete(record.uid);
      this.#done.add(record.uid);
    });
    this.#workers.set(record.uid, w);
    return w;
  }

  /**
   * Stops every pod (preStop, SIGTERM, grace period, SIGKILL), removes their namespaces, veths,
   * volumes and mountpoints, and deletes the Node (unless keepNode). Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.#pods?.stop();
      // Every pod, then the Node: a failure is logged and the rest still goes. A pod that did not
      // stop keeps its record, so the next run of the agent cleans it up.
      const stopped = await Promise.allSettled([...this.#workers.values()].map((w) => w.shutdown()));
      for (const r of stopped) {
        if (r.status === "rejected")
          this.#log.error({ err: r.reason as unknown }, "a pod did not stop cleanly");
      }
      this.#workers.clear();
      await this.#objects.stop();
      await this.#node
        .stop(!this.#o.keepNode)
        .catch((err: unknown) => this.#log.error({ err }, "could not update the Node on the way out"));
      await removeUnusedMountpoints(this.#tools.flock);
      this.#log.info("stopped");
    })();
    return this.#stopping;
  }
}
