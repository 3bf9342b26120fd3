// The Node object, as the kubelet keeps it: registered with the standard labels (plus the agent's
// own), the node's InternalIP, capacity and allocatable; then kept alive by a Lease in
// kube-node-lease renewed every 10 s (what the node lifecycle controller watches) and a status
// whose NodeReady condition is posted when it changes and at least every 5 minutes. Ready means the
// pod network is up: the controller-manager has given the Node a podCIDR and the bridge has it.
import {
  PatchStrategy,
  setHeaderOptions,
  type CoordinationV1Api,
  type CoreV1Api,
  type V1Node,
  type V1NodeCondition,
  type Watch,
} from "@kubernetes/client-node";
import { existsSync, readFileSync } from "node:fs";
import { arch, release } from "node:os";
import type { Logger } from "pino";
import { Informer } from "./informer.ts";
import { MERGE_PATCH, httpStatus, microTime } from "./kubeApi.ts";
import { apiTime, normalizeTime } from "./podStatus.ts";

export const LEASE_NAMESPACE = "kube-node-lease";
export const LEASE_DURATION_S = 40;
const LEASE_RENEW_MS = 10_000;
const STATUS_CHECK_MS = 10_000;
const STATUS_REPORT_MS = 5 * 60_000;
const STRATEGIC = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

export interface NodeIdentity {
  nodeName: string;
  nodeIp: string;
  labels: Record<string, string>;
  /** Set when the Node is created (never changed afterwards, like the kubelet's). */
  taints: { key: string; value?: string; effect: string }[];
  capacity: { cpu: string; memory: string; pods: string };
}

export interface Readiness {
  ready: boolean;
  reason: string;
  message: string;
}

export function goArch(nodeArch: string = arch()): string {
  return (
    (
      { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386", ppc64: "ppc64le", s390x: "s390x" } as Record<
        string,
        string
      >
    )[nodeArch] ?? nodeArch
  );
}

/** The labels the kubelet sets, then the agent's extra ones (which may not override them). */
export function nodeLabels(id: NodeIdentity): Record<string, string> {
  return {
    ...id.labels,
    "kubernetes.io/hostname": id.nodeName,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": goArch(),
  };
}

/** The Node's conditions: no resource pressure is ever measured, so those three are always False. */
export function nodeConditions(r: Readiness, previous: V1NodeCondition[], now: string): V1NodeCondition[] {
  const make = (type: string, status: "True" | "False", reason: string, message: string): V1NodeCondition => {
    const prev = previous.find((c) => c.type === type);
    const since =
      prev && prev.status === status && prev.lastTransitionTime
        ? normalizeTime(prev.lastTransitionTime)
        : now;
    return {
      type,
      status,
      reason,
      message,
      lastHeartbeatTime: now,
      lastTransitionTime: since,
    } as unknown as V1NodeCondition;
  };
  return [
    make(
      "MemoryPressure",
      "False",
      "KubeletHasSufficientMemory",
      "the lab agent does not measure memory pressure",
    ),
    make("DiskPressure", "False", "KubeletHasNoDiskPressure", "the lab agent does not measure disk pressure"),
    make("PIDPressure", "False", "KubeletHasSufficientPID", "the lab agent does not measure PID pressure"),
    make("Ready", r.ready ? "True" : "False", r.reason, r.message),
  ];
}

function firstLine(path: string): string {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n")[0]!.trim() : "";
}

function osImage(): string {
  const m = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(
    existsSync("/etc/os-release") ? readFileSync("/etc/os-release", "utf8") : "",
  );
  return m?.[1] ?? "Linux";
}

/** Node status fields other than conditions (they do not change while the agent runs). */
export function nodeStatusBase(id: NodeIdentity, kubeletVersion: string) {
  const resources = { ...id.capacity, "ephemeral-storage": "0" };
  return {
    addresses: [
      { type: "InternalIP", address: id.nodeIp },
      { type: "Hostname", address: id.nodeName },
    ],
    capacity: resources,
    allocatable: resources,
    daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
    nodeInfo: {
      machineID: firstLine("/etc/machine-id"),
      systemUUID: firstLine("/etc/machine-id"),
      bootID: firstLine("/proc/sys/kernel/random/boot_id"),
      kernelVersion: release(),
      osImage: osImage(),
      containerRuntimeVersion: "lab-agent://processes",
      kubeletVersion,
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: goArch(),
    },
  };
}

export interface NodeRegistrationOptions {
  core: CoreV1Api;
  coordination: CoordinationV1Api;
  watch: Watch;
  log: Logger;
  id: NodeIdentity;
  /** Reported as the Node's kubeletVersion (the API server's version: nothing here is older or newer). */
  version: string;
}

export class NodeRegistration {
  readonly #o: NodeRegistrationOptions;
  readonly #informer: Informer<V1Node>;
  #readiness: Readiness = {
    ready: false,
    reason: "KubeletNotReady",
    message: "the pod network is not ready: waiting for spec.podCIDR",
  };
  /** Until the agent says how the node is, an agent restart does not flap a Ready node to NotReady. */
  #readinessKnown = false;
  #lastReport = 0;
  #timers: NodeJS.Timeout[] = [];
  #podCidrWaiters: (() => void)[] = [];
  #stopped = false;

  constructor(o: NodeRegistrationOptions) {
    this.#o = o;
    const fieldSelector = `metadata.name=${o.id.nodeName}`;
    this.#informer = new Informer<V1Node>({
      name: "node",
      path: "/api/v1/nodes",
      watch: o.watch,
      fieldSelector,
      log: o.log,
      list: () => o.core.listNode({ fieldSelector }),
      onChange: () => {
        if (this.podCidr()) for (const w of this.#podCidrWaiters.splice(0)) w();
      },
    });
  }

  get node(): V1Node | undefined {
    return this.#informer.get(this.#o.id.nodeName);
  }

  podCidr(): string | undefined {
    return this.node?.spec?.podCIDR;
  }

  /** Creates the Node (or updates the labels of an existing one), posts its status, starts the heartbeats. */
  async start(): Promise<void> {
    await this.#register();
    await this.#informer.start();
    if (this.#stopped) return;
    // A new Node gets its addresses and capacity at once; a known one keeps its status until the agent is ready.
    if (!this.node?.status?.conditions?.length) await this.#postStatus(true);
    await this.#renewLease();
    this.#timers.push(
      setInterval(
        () =>
          void this.#renewLease().catch((err: unknown) => this.#o.log.warn({ err }, "lease renewal failed")),
        LEASE_RENEW_MS,
      ),
      setInterval(
        () =>
          void this.#postStatus().catch((err: unknown) =>
            this.#o.log.warn({ err }, "node status update failed"),
          ),
        STATUS_CHECK_MS,
      ),
    );
  }

  /** Resolves once the controller-manager has assigned spec.podCIDR (with "" when stopped first). */
  async waitForPodCidr(): Promise<string> {
    while (!this.podCidr()) {
      if (this.#stopped) return "";
      await new Promise<void>((resolve) => {
        this.#podCidrWaiters.push(resolve);
        // Bounded, so a stop() in between is noticed.
        setTimeout(resolve, 5_000).unref();
      });
    }
    return this.podCidr()!;
  }

  /** Sets the NodeReady condition; posted at once when it changes. */
  async setReadiness(r: Readiness): Promise<void> {
    const changed =
      !this.#readinessKnown || r.ready !== this.#readiness.ready || r.reason !== this.#readiness.reason;
    this.#readiness = r;
    this.#readinessKnown = true;
    if (changed) await this.#postStatus(true);
  }

  /**
   * Stops the heartbeats. With `deleteNode`, deletes the Node and its Lease (pods bound to it are
   * then removed by the pod garbage collector); otherwise leaves the Node marked not ready.
   */
  async stop(deleteNode: boolean): Promise<void> {
    this.#stopped = true;
    for (const t of this.#timers) clearInterval(t);
    for (const w of this.#podCidrWaiters.splice(0)) w();
    const { core, coordination, id } = this.#o;
    try {
      if (deleteNode) {
        await coordination
          .deleteNamespacedLease({ name: id.nodeName, namespace: LEASE_NAMESPACE })
          .catch(ignore404);
        await core.deleteNode({ name: id.nodeName }).catch(ignore404);
      } else {
        this.#readiness = { ready: false, reason: "KubeletNotReady", message: "the lab agent stopped" };
        await this.#postStatus(true);
      }
    } finally {
      await this.#informer.stop();
    }
  }

  async #register(): Promise<void> {
    const { core, id, log } = this.#o;
    const labels = nodeLabels(id);
    try {
      await core.createNode({
        body: {
          metadata: { name: id.nodeName, labels },
          ...(id.taints.length && { spec: { taints: id.taints } }),
        },
      });
      log.info({ node: id.nodeName }, "registered the Node");
    } catch (err) {
      if (httpStatus(err) !== 409) throw err;
      // Registered before (an agent restart): our labels are put back, anyone else's stay.
      await core.patchNode({ name: id.nodeName, body: { metadata: { labels } } }, MERGE_PATCH);
    }
  }

  async #postStatus(force = false): Promise<void> {
    if (!force && !this.#readinessKnown) return;
    if (!force && Date.now() - this.#lastReport < STATUS_REPORT_MS) {
      const current = this.node?.status?.conditions?.find((c) => c.type === "Ready");
      if (current?.status === (this.#readiness.ready ? "True" : "False")) return;
    }
    const { core, id } = this.#o;
    const now = apiTime();
    const status = {
      ...nodeStatusBase(id, this.#o.version),
      conditions: nodeConditions(this.#readiness, this.node?.status?.conditions ?? [], now),
    };
    try {
      // Strategic merge: conditions merge by type, so another writer's (NetworkUnavailable) stay.
      await core.patchNodeStatus({ name: id.nodeName, body: { status } }, STRATEGIC);
    } catch (err) {
      if (httpStatus(err) !== 404 || this.#stopped) throw err;
      // Someone deleted the Node: register again, as a restarted kubelet would.
      await this.#register();
      await core.patchNodeStatus({ name: id.nodeName, body: { status } }, STRATEGIC);
    }
    this.#lastReport = Date.now();
  }

  async #renewLease(): Promise<void> {
    const { coordination, id } = this.#o;
    const renewTime = microTime();
    try {
      await coordination.patchNamespacedLease(
        {
          name: id.nodeName,
          namespace: LEASE_NAMESPACE,
          body: { spec: { renewTime, holderIdentity: id.nodeName } },
        },
        MERGE_PATCH,
      );
    } catch (err) {
      if (httpStatus(err) !== 404) throw err;
      const uid = this.node?.metadata?.uid;
      await coordination.createNamespacedLease({
        namespace: LEASE_NAMESPACE,
        body: {
          metadata: {
            name: id.nodeName,
            namespace: LEASE_NAMESPACE,
            // Owned by the Node: deleting the Node deletes its Lease too.
            ...(uid && { ownerReferences: [{ apiVersion: "v1", kind: "Node", name: id.nodeName, uid }] }),
          },
          spec: {
            holderIdentity: id.nodeName,
            leaseDurationSeconds: LEASE_DURATION_S,
            renewTime: renewTime as unknown as Date,
          },
        },
      });
    }
  }
}

function ignore404(err: unknown): void {
  if (httpStatus(err) !== 404) throw err;
}
