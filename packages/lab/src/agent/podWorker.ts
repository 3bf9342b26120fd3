// One pod on this node, from first sight to removal: what the kubelet's pod worker does. Each sync
// compares the pod as the API has it with what runs here and does the next steps: refuse what the
// agent cannot run, make the sandbox (network namespace, veth, address) and the volumes, run the
// init containers one by one, start or restart the containers (with back-off), and on deletion run
// the preStop hooks, stop the containers within the grace period, remove everything and delete the
// Pod. Syncs never overlap: events that arrive during one (watch updates, container exits, probe
// results, timers) make one more. The status is written when it differs from the API's.
import type { CoreV1Api, V1Container, V1Pod, V1Probe } from "@kubernetes/client-node";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import type { RestartBackOff } from "./backoff.ts";
import { ContainerProcess, type ExitInfo, type SpawnTools } from "./containerProcess.ts";
import { isExecutable, launchScript, resolveCommand, type LaunchTools } from "./containerLaunch.ts";
import { containerSpec, podHostname, podHostsFile, type ContainerSpec } from "./containerSpec.ts";
import type { EventRecorder, EventType } from "./events.ts";
import type { Ipam } from "./ipam.ts";
import { MERGE_PATCH, httpStatus } from "./kubeApi.ts";
import { REGISTRY_DIR } from "./mountpoints.ts";
import { ContainerConfigError, type Allocatable, type PodRuntimeFields } from "./podEnv.ts";
import { checkSysctls, hostVethName, podNetnsName, type PodNetwork } from "./podNetwork.ts";
import { containerFiles, saveRecord, type ContainerRecord, type PodRecord } from "./podState.ts";
import {
  apiTime,
  desiredStatus,
  statusDiffers,
  type ContainerView,
  type PodView,
  type Terminated,
} from "./podStatus.ts";
import {
  checkVolumesSupported,
  prepareVolumes,
  referencedObjects,
  tokenRenewal,
  UnsupportedError,
  type PreparedVolume,
  type PreparedVolumes,
  type ServiceAccountToken,
} from "./podVolumes.ts";
import {
  ProbeTracker,
  nextProbeAt,
  probeTiming,
  runHandler,
  type HandlerTarget,
  type ProbeKind,
  type ProbeTools,
} from "./probes.ts";
import type { ReferencedObjects } from "./referencedObjects.ts";

export type Tools = SpawnTools & LaunchTools & ProbeTools;

/** What every pod worker of the agent shares. */
export interface NodeContext {
  nodeName: string;
  nodeIp: string;
  nodeRoot: string;
  log: Logger;
  core: CoreV1Api;
  events: EventRecorder;
  objects: ReferencedObjects;
  network: PodNetwork;
  ipam: Ipam;
  tools: Tools;
  apiServer: { host: string; port: number };
  allocatable: Allocatable;
  /** The agent's PATH: where commands of missing absolute paths are found, and the containers' PATH. */
  agentPath: string;
  backoff: RestartBackOff;
  /** Removes recorded mountpoints nothing uses any more (after a pod's containers are gone). */
  cleanMountpoints: () => Promise<void>;
}

/** One container run, with its probes. */
interface Run {
  proc: ContainerProcess;
  started: boolean;
  ready: boolean;
  /** Probes run (an adopted container's wait until the pod's spec is known). */
  probing: boolean;
  probeTimers: Set<NodeJS.Timeout>;
  stopping: boolean;
  startedMs: number;
}

const RETRY_MS = 5_000;
const DEFAULT_GRACE_S = 30;
const TERMINATION_MESSAGE_MAX = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;
/** Time the kubelet still gives a container after a preStop hook used up the grace period. */
const MIN_KILL_GRACE_MS = 2_000;

export class PodWorker {
  readonly uid: string;
  readonly dir: string;
  readonly #ctx: NodeContext;
  readonly #log: Logger;
  readonly record: PodRecord;
  #pod: V1Pod | undefined;
  /** The last pod object seen (kept once it is gone from the API, for its spec). */
  #lastPod: V1Pod | undefined;
  readonly #runs = new Map<string, Run>();
  readonly #waiting = new Map<string, { reason: string; message?: string }>();
  #volumes: PreparedVolumes | undefined;
  readonly #tokens = new Map<string, ServiceAccountToken>();
  #rejected: { reason: string; message: string } | undefined;
  #sandboxReady = false;
  #released = false;
  #removed = false;
  #final = false;
  #finished = false;
  #syncing: Promise<void> | undefined;
  #again = false;
  #wakeAt = Infinity;
  #wakeTimer: NodeJS.Timeout | undefined;
  #lastSent: { json: string; rv: string | undefined } | undefined;
  readonly #onFinished: () => void;

  constructor(ctx: NodeContext, dir: string, record: PodRecord, onFinished: () => void) {
    this.#ctx = ctx;
    this.dir = dir;
    this.record = record;
    this.uid = record.uid;
    this.#log = ctx.log.child({ pod: `${record.namespace}/${record.name}`, uid: record.uid });
    this.#onFinished = onFinished;
  }

  /**
   * Follows what a previous agent left running: containers whose shims still run are watched
   * again, the others are taken as exited (their status files say how).
   */
  adopt(): void {
    for (const [name, rec] of Object.entries(this.record.containers)) {
      if (!rec.running) continue;
      const files = containerFiles(this.dir, name);
      const proc = ContainerProcess.adopt(rec.running, files.exit, files.error);
      if (proc) {
        this.#log.info({ container: name, pid: rec.running.init?.pid }, "adopted a running container");
        this.#attach(name, proc);
      } else {
        this.#recordExit(name, ContainerProcess.exitOf(rec.running, files.exit, files.error));
      }
    }
    this.#save();
  }

  /** The latest pod object from the API, or undefined once it is gone from it. */
  update(pod: V1Pod | undefined): void {
    if (pod) this.#lastPod = pod;
    this.#pod = pod;
    this.#startPendingProbes();
    this.trigger();
  }

  /** Asks for a sync; one runs at a time, triggers during one make exactly one more. */
  trigger(): void {
    if (this.#finished) return;
    if (this.#syncing) {
      this.#again = true;
      return;
    }
    this.#syncing = (async () => {
      do {
        this.#again = false;
        try {
          await this.#sync();
        } catch (err) {
          this.#log.warn({ err }, "pod sync failed; retrying");
          this.#wake(Date.now() + RETRY_MS);
        }
      } while (this.#again && !this.#finished);
      this.#syncing = undefined;
    })();
  }

  /** Resolves once no sync runs. */
  async idle(): Promise<void> {
    while (this.#syncing) await this.#syncing;
  }

  /**
   * The agent is stopping: stop the containers as a deletion would (preStop, SIGTERM, grace), report
   * them terminated, remove the sandbox; the Pod object stays (failed, like after a node shutdown).
   */
  async shutdown(): Promise<void> {
    await this.idle();
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#wakeTimer);
    const pod = this.#pod ?? this.#lastPod;
    if (!pod) {
      await this.#killAll();
      await this.#removeEverything();
      return;
    }
    await this.#stopContainers(pod, this.#graceMs(pod));
    this.#final = true;
    // As after a kubelet's graceful node shutdown: the pod failed, and its controller replaces it.
    const message = `the lab agent of node ${this.#ctx.nodeName} stopped`;
    await this.#publish(pod, { phase: "Failed", reason: "Terminated", message }).catch((err: unknown) =>
      this.#log.warn({ err }, "could not report the pod stopped"),
    );
    await this.#removeEverything();
  }

  // ---- the sync -------------------------------------------------------------------------------

  async #sync(): Promise<void> {
    if (this.#finished) return;
    const pod = this.#pod;
    if (!pod || pod.metadata?.uid !== this.uid) {
      // Gone from the API (force-deleted): nothing to report to, stop at once.
      await this.#terminate(this.#lastPod, 0, false);
      return;
    }
    if (pod.metadata?.deletionTimestamp) {
      const grace =
        pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S;
      await this.#terminate(pod, grace * 1000, true);
      return;
    }
    if (this.#final || (this.#runs.size === 0 && ["Succeeded", "Failed"].includes(pod.status?.phase ?? ""))) {
      // Terminal: nothing runs again; the status stays for whoever reads it.
      this.#final = true;
      await this.#killAll();
      await this.#releaseSandbox();
      await this.#publish(pod);
      return;
    }
    if (!this.#admit(pod)) {
      this.#final = true;
      await this.#publish(pod);
      return;
    }
    this.record.startTime ??= apiTime();
    if (!(await this.#ensureSandbox(pod)) || !(await this.#ensureVolumes(pod))) {
      await this.#publish(pod);
      return;
    }
    const spec = pod.spec!;
    const policy = spec.restartPolicy ?? "Always";
    let initDone = true;
    for (const c of spec.initContainers ?? []) {
      if (this.#runs.has(c.name)) {
        initDone = false;
        break;
      }
      const t = this.record.containers[c.name]?.terminated;
      if (t?.exitCode === 0) continue;
      initDone = false;
      if (t && policy === "Never") {
        // A failed init container with restartPolicy Never fails the pod.
        this.#final = true;
        break;
      }
      await this.#maybeStart(pod, c, t);
      break;
    }
    if (initDone) {
      for (const c of spec.containers) {
        if (this.#runs.has(c.name)) continue;
        const t = this.record.containers[c.name]?.terminated;
        if (t && !(policy === "Always" || (policy === "OnFailure" && t.exitCode !== 0))) continue;
        await this.#maybeStart(pod, c, t);
      }
      const allDone = spec.containers.every((c) => {
        const t = this.record.containers[c.name]?.terminated;
        return (
          !this.#runs.has(c.name) &&
          t &&
          !(policy === "Always" || (policy === "OnFailure" && t.exitCode !== 0))
        );
      });
      if (allDone) this.#final = true;
    }
    await this.#publish(pod);
    if (this.#final) {
      this.#log.info(
        { phase: desiredStatus(pod, this.#view(pod), apiTime()).phase },
        "pod finished; freeing its sandbox",
      );
      await this.#killAll();
      await this.#releaseSandbox();
    }
  }

  /** Refuses, once and for good, what the agent cannot run faithfully. */
  #admit(pod: V1Pod): boolean {
    if (this.#rejected) return false;
    const spec = pod.spec!;
    const problems: string[] = [];
    try {
      checkVolumesSupported(pod);
    } catch (err) {
      if (!(err instanceof UnsupportedError)) throw err;
      problems.push(err.message);
    }
    const sysctl = checkSysctls(spec.securityContext?.sysctls ?? []);
    if (sysctl) problems.push(sysctl);
    if (spec.hostNetwork && (spec.securityContext?.sysctls ?? []).length) {
      problems.push("sysctls of a hostNetwork pod would change the node's network namespace");
    }
    if (spec.shareProcessNamespace) problems.push("shareProcessNamespace is not supported by the lab agent");
    for (const c of spec.initContainers ?? []) {
      if (c.restartPolicy === "Always")
        problems.push(`init container "${c.name}": sidecar containers are not supported by the lab agent`);
    }
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      for (const p of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
        if (p?.grpc) problems.push(`container "${c.name}": gRPC probes are not supported by the lab agent`);
      }
    }
    if (!problems.length) return true;
    this.#rejected = { reason: "UnsupportedPodSpec", message: problems.join("; ") };
    this.#event(pod, "Warning", "UnsupportedPodSpec", this.#rejected.message);
    return false;
  }

  // ---- sandbox and volumes ---------------------------------------------------------------------

  async #ensureSandbox(pod: V1Pod): Promise<boolean> {
    const rec = this.record;
    if (pod.spec?.hostNetwork) {
      rec.hostNetwork = true;
      rec.ip = this.#ctx.nodeIp;
      this.#sandboxReady = true;
      return true;
    }
    this.#released = false;
    try {
      rec.netns ??= podNetnsName(this.uid);
      rec.hostVeth ??= hostVethName(this.uid);
      rec.ip = this.#ctx.ipam.allocate(this.uid);
      this.#save(); // recorded before anything exists, so a crash in between leaves nothing unknown
      const holder = [...this.#runs.values()].find((r) => r.proc.running.init)?.proc.running.init;
      if (holder && !this.#ctx.network.netnsMounted(rec.netns)) {
        await this.#ctx.network.reattach(rec.netns, holder.pid);
      }
      if (!holder || !this.#sandboxReady) {
        await this.#ctx.network.setUp(
          rec.netns,
          rec.hostVeth,
          rec.ip,
          pod.spec?.securityContext?.sysctls ?? [],
        );
      }
      this.#sandboxReady = true;
      this.#writeHosts(pod);
      return true;
    } catch (err) {
      this.#sandboxReady = false;
      this.#event(
        pod,
        "Warning",
        "FailedCreatePodSandBox",
        `Failed to create pod sandbox: ${(err as Error).message}`,
      );
      this.#wake(Date.now() + RETRY_MS);
      return false;
    }
  }

  #writeHosts(pod: V1Pod): void {
    writeFileSync(join(this.dir, "etc-hosts"), podHostsFile(pod, this.record.ip, this.#ctx.nodeName), {
      mode: 0o644,
    });
  }

  async #ensureVolumes(pod: V1Pod): Promise<boolean> {
    const ns = pod.metadata!.namespace!;
    const refs = referencedObjects(pod);
    try {
      await this.#ctx.objects.use(this.uid, [
        ...[...refs.configMaps].map((name) => ({ kind: "configmaps" as const, namespace: ns, name })),
        ...[...refs.secrets].map((name) => ({ kind: "secrets" as const, namespace: ns, name })),
      ]);
      this.#volumes = await prepareVolumes(this.dir, this.#ctx.nodeRoot, {
        pod,
        runtime: this.#runtime(),
        allocatable: this.#ctx.allocatable,
        configMap: (name) => this.#ctx.objects.configMap(ns, name),
        secret: (name) => this.#ctx.objects.secret(ns, name),
        token: (audience, seconds) => this.#token(pod, audience, seconds),
      });
      if (this.#volumes.renewAt) this.#wake(this.#volumes.renewAt.getTime());
      return true;
    } catch (err) {
      // A missing ConfigMap or key, an API error, a bad hostPath: the kubelet's FailedMount, retried.
      this.#event(pod, "Warning", "FailedMount", `MountVolume.SetUp failed: ${(err as Error).message}`);
      this.#wake(Date.now() + RETRY_MS);
      return false;
    }
  }

  /** A service account token for the pod (TokenRequest bound to it), reused until its renewal time. */
  async #token(pod: V1Pod, audience: string | undefined, seconds: number): Promise<ServiceAccountToken> {
    const key = `${audience ?? ""}/${seconds}`;
    const cached = this.#tokens.get(key);
    if (cached && cached.renewAt.getTime() > Date.now()) return cached;
    const tr = await this.#ctx.core.createNamespacedServiceAccountToken({
      name: pod.spec?.serviceAccountName ?? "default",
      namespace: pod.metadata!.namespace!,
      body: {
        spec: {
          audiences: audience ? [audience] : [],
          expirationSeconds: seconds,
          boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.metadata!.name!, uid: this.uid },
        },
      },
    });
    if (!tr.status?.token)
      throw new Error(`TokenRequest for ServiceAccount ${pod.spec?.serviceAccountName} returned no token`);
    const expires = new Date(tr.status.expirationTimestamp ?? Date.now() + seconds * 1000);
    const token = { token: tr.status.token, renewAt: tokenRenewal(new Date(), expires) };
    this.#tokens.set(key, token);
    return token;
  }

  #runtime(): PodRuntimeFields {
    const ip = this.record.ip ?? "";
    return { podIP: ip, podIPs: ip ? [ip] : [], hostIP: this.#ctx.nodeIp, hostIPs: [this.#ctx.nodeIp] };
  }

  // ---- containers ------------------------------------------------------------------------------

  /** Starts `c` now, or once its restart back-off has passed. */
  async #maybeStart(pod: V1Pod, c: V1Container, last: Terminated | undefined): Promise<void> {
    if (last) {
      const key = `${this.uid}/${c.name}`;
      const wait = this.#ctx.backoff.waitMs(key, new Date(last.finishedAt).getTime());
      if (wait > 0) {
        const delay = Math.round(this.#ctx.backoff.currentDelayMs(key) / 1000);
        const message = `back-off ${delay}s restarting failed container=${c.name} pod=${pod.metadata?.name}_${pod.metadata?.namespace}(${this.uid})`;
        if (this.#waiting.get(c.name)?.reason !== "CrashLoopBackOff") {
          this.#event(
            pod,
            "Warning",
            "BackOff",
            `Back-off restarting failed container ${c.name} in pod ${pod.metadata?.name}`,
            c.name,
          );
        }
        this.#waiting.set(c.name, { reason: "CrashLoopBackOff", message });
        this.#wake(Date.now() + wait);
        return;
      }
    }
    await this.#start(pod, c);
  }

  async #start(pod: V1Pod, c: V1Container): Promise<void> {
    const ctx = this.#ctx;
    const files = containerFiles(this.dir, c.name);
    const ns = pod.metadata!.namespace!;
    let spec: ContainerSpec;
    try {
      spec = containerSpec({
        pod,
        container: c,
        podDir: this.dir,
        volumes: this.#volumes?.volumes ?? new Map<string, PreparedVolume>(),
        runtime: this.#runtime(),
        configMap: (name) => ctx.objects.configMap(ns, name),
        secret: (name) => ctx.objects.secret(ns, name),
        allocatable: ctx.allocatable,
        apiServer: ctx.apiServer,
        agentPath: ctx.agentPath,
        hostname: podHostname(pod, ctx.nodeName),
      });
    } catch (err) {
      if (!(err instanceof ContainerConfigError)) throw err;
      if (this.#waiting.get(c.name)?.message !== err.message) {
        this.#event(pod, "Warning", "Failed", `Error: ${err.message}`, c.name);
      }
      this.#waiting.set(c.name, { reason: "CreateContainerConfigError", message: err.message });
      this.#wake(Date.now() + RETRY_MS);
      return;
    }
    const { env, setpriv, mounts, argv } = spec;
    const rec = (this.record.containers[c.name] ??= { restartCount: 0 });
    const runNumber = rec.terminated ? rec.restartCount + 1 : rec.restartCount;
    const containerID = `lab://${this.uid}/${c.name}/${runNumber}`;
    const resolved =
      argv[0] === undefined
        ? { error: "no command: the lab agent runs no images, so the container must set command" }
        : resolveCommand(argv[0], {
            containerPath: env.PATH ?? ctx.agentPath,
            agentPath: ctx.agentPath,
            mountTargets: mounts.map((m) => m.target),
            isExecutable,
          });
    const now = new Date().toISOString();
    if ("error" in resolved) {
      // What a runtime reports when the exec fails: the run ends at once with StartError.
      const message = resolved.error;
      this.#event(pod, "Warning", "Failed", `Error: ${message}`, c.name);
      this.#beginRun(rec);
      this.#recordExit(
        c.name,
        { exitCode: 128, setupError: message, finishedAt: new Date() },
        now,
        containerID,
      );
      this.trigger();
      return;
    }
    const command = resolved.path;
    writeFileSync(
      files.script,
      launchScript({
        tools: ctx.tools,
        registryDir: REGISTRY_DIR,
        errorFile: files.error,
        mounts,
        ownProc: !pod.spec?.hostPID,
        hostname: podHostname(pod, ctx.nodeName),
        readOnlyRoot: spec.readOnlyRoot,
        ...(c.workingDir && { workingDir: c.workingDir }),
        setpriv,
        argv: [command, ...argv.slice(1)],
      }),
      { mode: 0o700 },
    );
    const proc = await ContainerProcess.start({
      tools: ctx.tools,
      ...(!pod.spec?.hostNetwork && { netns: this.record.netns! }),
      pidNamespace: !pod.spec?.hostPID,
      script: files.script,
      logFile: files.log,
      exitFile: files.exit,
      errorFile: files.error,
      env,
      setpriv,
      containerID,
    });
    this.#beginRun(rec);
    rec.running = proc.running;
    this.#save();
    this.#waiting.delete(c.name);
    this.#log.info(
      { container: c.name, pid: proc.running.init?.pid, restartCount: rec.restartCount, command },
      "container started",
    );
    this.#event(pod, "Normal", "Started", `Started container ${c.name}`, c.name);
    this.#attach(c.name, proc);
    const postStart = c.lifecycle?.postStart;
    if (postStart) {
      const r = await runHandler(postStart, this.#target(c, proc), this.#graceMs(pod));
      if (!r.ok && !proc.done) {
        this.#event(pod, "Warning", "FailedPostStartHook", `PostStartHook failed: ${r.detail}`, c.name);
        await proc.stop(this.#graceMs(pod));
      }
    }
  }

  /** A new run of the container begins: the previous end becomes its last state. */
  #beginRun(rec: ContainerRecord): void {
    if (rec.terminated) {
      rec.restartCount++;
      rec.lastTerminated = rec.terminated;
      rec.terminated = undefined;
    }
  }

  /**
   * Watches a started (or adopted) container: its exit and its probes. An adopted container keeps
   * the started and ready state its record has; its probes go on from there.
   */
  #attach(name: string, proc: ContainerProcess): void {
    const run: Run = {
      proc,
      started: proc.running.started === true,
      ready: proc.running.ready === true,
      probing: false,
      probeTimers: new Set(),
      stopping: false,
      startedMs: new Date(proc.running.startedAt).getTime(),
    };
    this.#runs.set(name, run);
    void proc.exited.then((info) => {
      for (const t of run.probeTimers) clearTimeout(t);
      if (this.#runs.get(name) === run) this.#runs.delete(name);
      this.#recordExit(name, info);
      this.#log.info(
        { container: name, exitCode: info.exitCode, setupError: info.setupError },
        "container exited",
      );
      this.trigger();
    });
    this.#startPendingProbes();
  }

  #startPendingProbes(): void {
    for (const [name, run] of this.#runs) {
      const c = this.#container(name);
      if (run.probing || !c) continue;
      run.probing = true;
      this.#startProbes(c, run);
    }
  }

  /** Records a change of the container's started/ready state (for an agent restart) and reports it. */
  #probeState(run: Run, started: boolean, ready: boolean): void {
    run.started = started;
    run.ready = ready;
    run.proc.running.started = started;
    run.proc.running.ready = ready;
    this.#save();
    this.trigger();
  }

  #container(name: string): V1Container | undefined {
    const spec = (this.#pod ?? this.#lastPod)?.spec;
    return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find((c) => c.name === name);
  }

  #isInit(name: string): boolean {
    return ((this.#pod ?? this.#lastPod)?.spec?.initContainers ?? []).some((c) => c.name === name);
  }

  #recordExit(name: string, info: ExitInfo, startedAt?: string, containerID?: string): void {
    const rec = (this.record.containers[name] ??= { restartCount: 0 });
    const running = rec.running;
    const c = this.#container(name);
    const reason = info.setupError
      ? "StartError"
      : info.lost
        ? "ContainerStatusUnknown"
        : info.exitCode === 0
          ? "Completed"
          : "Error";
    const message =
      info.setupError ?? info.lost ?? (c ? this.#terminationMessage(c, info.exitCode) : undefined);
    rec.terminated = {
      exitCode: info.exitCode,
      reason,
      ...(message && { message }),
      startedAt: apiTime(new Date(running?.startedAt ?? startedAt ?? info.finishedAt)),
      finishedAt: apiTime(info.finishedAt),
      ...((running?.containerID ?? containerID) && { containerID: running?.containerID ?? containerID }),
    };
    rec.running = undefined;
    this.#save();
  }

  /** What the container wrote to its terminationMessagePath, or (FallbackToLogsOnError) its log's tail. */
  #terminationMessage(c: V1Container, exitCode: number): string | undefined {
    const files = containerFiles(this.dir, c.name);
    try {
      const written = readFileSync(files.terminationLog).subarray(0, TERMINATION_MESSAGE_MAX).toString();
      if (written) return written;
      if (c.terminationMessagePolicy === "FallbackToLogsOnError" && exitCode !== 0) {
        const tail = readFileSync(files.log, "utf8")
          .trimEnd()
          .split("\n")
          .slice(-FALLBACK_LOG_LINES)
          .join("\n");
        return tail.slice(-FALLBACK_LOG_BYTES) || undefined;
      }
    } catch {
      // no file: no message
    }
    return undefined;
  }

  #target(c: V1Container, proc: ContainerProcess): HandlerTarget {
    const tools = this.#ctx.tools;
    const env = proc.running.env;
    return {
      pid: proc.running.init?.pid ?? -1,
      podIP: this.record.ip ?? this.#ctx.nodeIp,
      ports: c.ports ?? [],
      tools,
      exec: (argv, timeoutMs) => {
        const resolved =
          argv[0] &&
          resolveCommand(argv[0], {
            containerPath: env.PATH ?? this.#ctx.agentPath,
            agentPath: this.#ctx.agentPath,
            mountTargets: (c.volumeMounts ?? []).map((m) => m.mountPath),
            isExecutable,
          });
        const command = resolved && "path" in resolved ? resolved.path : argv[0];
        return proc.exec(tools, [command || "true", ...argv.slice(1)], timeoutMs);
      },
    };
  }

  // ---- probes ----------------------------------------------------------------------------------

  #startProbes(c: V1Container, run: Run): void {
    const isInit = this.#isInit(c.name);
    const markStarted = () => {
      if (!isInit) {
        if (c.livenessProbe) this.#probe(c, run, "liveness", c.livenessProbe);
        if (c.readinessProbe) this.#probe(c, run, "readiness", c.readinessProbe, undefined, run.ready);
      }
      this.#probeState(run, true, run.ready || (!isInit && !c.readinessProbe));
    };
    if (!isInit && c.startupProbe && !run.started)
      this.#probe(c, run, "startup", c.startupProbe, markStarted);
    else markStarted();
  }

  #probe(
    c: V1Container,
    run: Run,
    kind: ProbeKind,
    probe: V1Probe,
    onPassed?: () => void,
    passed?: boolean,
  ): void {
    const timing = probeTiming(probe);
    const tracker = new ProbeTracker(kind, timing, passed);
    const target = this.#target(c, run.proc);
    let lastRun: number | undefined;
    const schedule = () => {
      if (run.stopping || run.proc.done) return;
      const at = nextProbeAt(timing, run.startedMs, lastRun);
      const timer = setTimeout(
        () => {
          run.probeTimers.delete(timer);
          void attempt();
        },
        Math.max(0, at - Date.now()),
      );
      run.probeTimers.add(timer);
    };
    const attempt = async () => {
      lastRun = Date.now();
      const r = await runHandler(probe, target, timing.timeoutMs);
      if (run.stopping || run.proc.done) return;
      const pod = this.#pod;
      if (!r.ok && pod) {
        const what = kind[0]!.toUpperCase() + kind.slice(1);
        this.#event(pod, "Warning", "Unhealthy", `${what} probe failed: ${r.detail}`, c.name);
      }
      const changed = tracker.record(r.ok);
      if (kind === "startup" && tracker.passed) {
        onPassed?.();
        return; // a startup probe stops once it has passed
      }
      if ((kind === "liveness" || kind === "startup") && changed && !tracker.passed) {
        await this.#restartUnhealthy(c, run, kind, probe);
        return;
      }
      if (kind === "readiness" && changed) this.#probeState(run, run.started, tracker.passed);
      schedule();
    };
    schedule();
  }

  async #restartUnhealthy(c: V1Container, run: Run, kind: ProbeKind, probe: V1Probe): Promise<void> {
    const pod = this.#pod;
    if (!pod) return;
    run.stopping = true;
    run.ready = false;
    this.#event(
      pod,
      "Normal",
      "Killing",
      `Container ${c.name} failed ${kind} probe, will be restarted`,
      c.name,
    );
    const graceMs =
      probe.terminationGracePeriodSeconds != null
        ? probe.terminationGracePeriodSeconds * 1000
        : this.#graceMs(pod);
    await this.#preStop(pod, c, run, graceMs);
    await run.proc.stop(graceMs);
  }

  // ---- stopping --------------------------------------------------------------------------------

  #graceMs(pod: V1Pod): number {
    return (pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S) * 1000;
  }

  async #preStop(pod: V1Pod, c: V1Container, run: Run, timeoutMs: number): Promise<void> {
    const hook = c.lifecycle?.preStop;
    if (!hook || run.proc.done) return;
    const r = await runHandler(hook, this.#target(c, run.proc), timeoutMs);
    if (!r.ok) this.#event(pod, "Warning", "FailedPreStopHook", `PreStopHook failed: ${r.detail}`, c.name);
  }

  /** preStop hooks (in parallel), then SIGTERM, SIGKILL at the end of the grace period. */
  async #stopContainers(pod: V1Pod | undefined, graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    const runs = [...this.#runs.entries()];
    for (const [, run] of runs) {
      run.stopping = true;
      run.ready = false;
      for (const t of run.probeTimers) clearTimeout(t);
    }
    await Promise.all(
      runs.map(async ([name, run]) => {
        const c = this.#container(name);
        if (pod && c) {
          this.#event(pod, "Normal", "Killing", `Stopping container ${name}`, name);
          await this.#preStop(pod, c, run, Math.max(0, deadline - Date.now()));
        }
        // A preStop hook that used up the grace period still leaves SIGTERM a moment (not on a forced stop).
        const left = deadline - Date.now();
        const info = await run.proc.stop(graceMs > 0 ? Math.max(MIN_KILL_GRACE_MS, left) : 0);
        this.#log.info({ container: name, exitCode: info.exitCode }, "container stopped");
      }),
    );
    // Exit handlers have recorded each end; wait for them to have run.
    await Promise.all(runs.map(([, run]) => run.proc.exited));
    await new Promise((r) => setImmediate(r));
  }

  /** Stops everything at once (no grace): for pods that are gone or finished. */
  async #killAll(): Promise<void> {
    await Promise.all([...this.#runs.values()].map((r) => r.proc.kill()));
    await new Promise((r) => setImmediate(r));
  }

  /**
   * The pod is deleted (or gone): stop its containers within `graceMs`, remove everything of it,
   * and (when it still exists in the API) delete the Pod object, as the kubelet does last.
   */
  async #terminate(pod: V1Pod | undefined, graceMs: number, deleteFromApi: boolean): Promise<void> {
    this.#final = true;
    await this.#stopContainers(pod, graceMs);
    if (pod && deleteFromApi) {
      await this.#publish(pod).catch((err: unknown) => this.#log.debug({ err }, "final status not written"));
    }
    await this.#removeEverything();
    if (pod && deleteFromApi) {
      try {
        await this.#ctx.core.deleteNamespacedPod({
          name: pod.metadata!.name!,
          namespace: pod.metadata!.namespace!,
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid: this.uid } },
        });
      } catch (err) {
        if (httpStatus(err) !== 404 && httpStatus(err) !== 409) throw err;
      }
      this.#log.info("pod deleted");
    }
    this.#finished = true;
    clearTimeout(this.#wakeTimer);
    this.#onFinished();
  }

  /** Frees the pod's network (namespace, veth, address) and volumes; for pods that finished but still exist. */
  async #releaseSandbox(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    const rec = this.record;
    if (rec.netns && rec.hostVeth) await this.#ctx.network.tearDown(rec.netns, rec.hostVeth);
    this.#ctx.ipam.release(this.uid);
    this.#sandboxReady = false;
    // rec.ip stays: a finished pod keeps reporting the address it had (the API refuses to unset it).
    rec.netns = undefined;
    rec.hostVeth = undefined;
    this.#save();
    this.#ctx.objects.release(this.uid);
    rmSync(join(this.dir, "volumes"), { recursive: true, force: true });
    await this.#ctx.cleanMountpoints();
  }

  /** Everything of the pod on this machine: sandbox, volumes, logs, record, mountpoints. */
  async #removeEverything(): Promise<void> {
    await this.#releaseSandbox();
    this.#removed = true;
    this.#ctx.events.forget(this.uid);
    this.#ctx.backoff.forget(`${this.uid}/`);
    rmSync(this.dir, { recursive: true, force: true });
  }

  // ---- status ----------------------------------------------------------------------------------

  #view(pod: V1Pod): PodView {
    const view = (c: V1Container): ContainerView => {
      const rec = this.record.containers[c.name];
      const run = this.#runs.get(c.name);
      const base = {
        name: c.name,
        image: c.image ?? "",
        restartCount: rec?.restartCount ?? 0,
        ...(rec?.running?.containerID && { containerID: rec.running.containerID }),
      };
      if (run && rec?.running) {
        return {
          ...base,
          state: { kind: "running", startedAt: apiTime(new Date(rec.running.startedAt)) },
          ...(rec.lastTerminated && { lastTerminated: rec.lastTerminated }),
          ready: run.ready && !run.stopping,
          started: run.started,
        };
      }
      const waiting = this.#waiting.get(c.name);
      if (rec?.terminated && waiting?.reason === "CrashLoopBackOff" && !this.#final) {
        return {
          ...base,
          state: { kind: "waiting", ...waiting },
          lastTerminated: rec.terminated,
          ready: false,
          started: false,
        };
      }
      if (rec?.terminated) {
        return {
          ...base,
          containerID: rec.terminated.containerID,
          state: { kind: "terminated", ...rec.terminated },
          ...(rec.lastTerminated && { lastTerminated: rec.lastTerminated }),
          // A completed init container counts as ready, as the kubelet reports it.
          ready: this.#isInit(c.name) && rec.terminated.exitCode === 0,
          started: false,
        };
      }
      const initPending = (pod.spec?.initContainers ?? []).some(
        (i) => this.record.containers[i.name]?.terminated?.exitCode !== 0,
      );
      const fallback = this.#isInit(c.name) || initPending ? "PodInitializing" : "ContainerCreating";
      return {
        ...base,
        state: { kind: "waiting", ...(waiting ?? { reason: fallback }) },
        ready: false,
        started: false,
      };
    };
    return {
      ...(this.#rejected && { rejected: this.#rejected }),
      sandboxReady: this.#sandboxReady,
      ...(this.record.ip && { podIP: this.record.ip }),
      hostIP: this.#ctx.nodeIp,
      ...(this.record.startTime && { startTime: this.record.startTime }),
      initContainers: (pod.spec?.initContainers ?? []).map(view),
      containers: (pod.spec?.containers ?? []).map(view),
      final: this.#final,
    };
  }

  /** Writes the pod's status when it differs from the API's (or from what was last written). */
  async #publish(pod: V1Pod, override?: { phase: "Failed"; reason: string; message: string }): Promise<void> {
    const current = this.#pod ?? pod;
    const desired = desiredStatus(current, this.#view(current), apiTime());
    if (override) Object.assign(desired, override);
    const rv = current.metadata?.resourceVersion;
    const json = JSON.stringify(desired);
    // The cache has not caught up with our own last write yet: compare with that write instead.
    if (this.#lastSent && this.#lastSent.rv === rv && this.#lastSent.json === json) return;
    if (!statusDiffers(current.status, desired)) return;
    try {
      await this.#ctx.core.patchNamespacedPodStatus(
        {
          name: current.metadata!.name!,
          namespace: current.metadata!.namespace!,
          body: { metadata: { uid: this.uid }, status: desired },
        },
        MERGE_PATCH,
      );
      this.#lastSent = { json, rv };
    } catch (err) {
      if (httpStatus(err) === 404) return; // deleted meanwhile: the next sync sees it
      throw err;
    }
  }

  // ---- helpers ---------------------------------------------------------------------------------

  #event(pod: V1Pod, type: EventType, reason: string, message: string, container?: string): void {
    this.#ctx.events.record(
      {
        namespace: pod.metadata!.namespace!,
        name: pod.metadata!.name!,
        uid: this.uid,
        ...(container && {
          fieldPath: `spec.${this.#isInit(container) ? "initContainers" : "containers"}{${container}}`,
        }),
      },
      type,
      reason,
      message,
    );
    if (type === "Warning") this.#log.warn({ reason, container }, message);
  }

  /** Syncs again at `at` (the earliest of all requested wake-ups). */
  #wake(at: number): void {
    if (at >= this.#wakeAt && this.#wakeTimer) return;
    clearTimeout(this.#wakeTimer);
    this.#wakeAt = at;
    // setTimeout's limit is ~24.8 days; a token renewal may be a day away at most.
    this.#wakeTimer = setTimeout(
      () => {
        this.#wakeAt = Infinity;
        this.#wakeTimer = undefined;
        this.trigger();
      },
      Math.min(Math.max(0, at - Date.now()), 2 ** 31 - 1),
    );
  }

  #save(): void {
    if (!this.#removed) saveRecord(this.dir, this.record);
  }
}
