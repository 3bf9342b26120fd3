// A pod's status as the kubelet reports it, computed from what the agent knows of the pod's containers:
// the phase (the kubelet's getPhase), the conditions (PodReadyToStartContainers, Initialized,
// ContainersReady, Ready with readiness gates; PodScheduled and any other writer's conditions are
// kept), addresses, start time and per-container states. Pure, so the agent can compare it with the
// status it last saw and write only a change. Times are RFC 3339 at whole seconds, as the API stores them.
import type { V1Pod } from "@kubernetes/client-node";

export interface Terminated {
  exitCode: number;
  signal?: number;
  reason: string;
  message?: string;
  startedAt?: string;
  finishedAt: string;
  containerID?: string;
}

export type RuntimeState =
  | { kind: "waiting"; reason: string; message?: string }
  | { kind: "running"; startedAt: string }
  | ({ kind: "terminated" } & Terminated);

export interface ContainerView {
  name: string;
  image: string;
  state: RuntimeState;
  lastTerminated?: Terminated;
  restartCount: number;
  ready: boolean;
  started: boolean;
  containerID?: string;
}

export interface PodView {
  /** The agent refused the pod (unsupported spec): it fails with this reason, nothing runs. */
  rejected?: { reason: string; message: string };
  sandboxReady: boolean;
  podIP?: string;
  hostIP: string;
  startTime?: string;
  initContainers: ContainerView[];
  containers: ContainerView[];
  /** Nothing of the pod will run again (it is being deleted, or its node agent is stopping it). */
  final?: boolean;
}

export type Phase = "Pending" | "Running" | "Succeeded" | "Failed";

interface Condition {
  type: string;
  status: "True" | "False";
  reason?: string;
  message?: string;
  lastTransitionTime: string;
  lastProbeTime: null;
}

/** The status fields the agent owns; everything else in the pod's status is left alone. */
export interface ManagedStatus {
  phase: Phase;
  reason: string | null;
  message: string | null;
  conditions: Record<string, unknown>[];
  hostIP: string;
  hostIPs: { ip: string }[];
  podIP: string | null;
  podIPs: { ip: string }[] | null;
  startTime: string | null;
  initContainerStatuses: Record<string, unknown>[];
  containerStatuses: Record<string, unknown>[];
}

/** The condition types the kubelet owns (all others belong to someone else and are kept). */
const OWN_CONDITIONS = ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"];

export function apiTime(ms: number | Date = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

/** Whether every init container finished successfully. */
export function initialized(view: PodView): boolean {
  return view.initContainers.every((c) => c.state.kind === "terminated" && c.state.exitCode === 0);
}

/** The kubelet's getPhase over the container states. */
export function podPhase(restartPolicy: string, view: PodView): Phase {
  if (view.rejected) return "Failed";
  if (!initialized(view)) {
    const failed = view.initContainers.some((c) => c.state.kind === "terminated" && c.state.exitCode !== 0);
    return failed && restartPolicy === "Never" ? "Failed" : "Pending";
  }
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const c of view.containers) {
    if (c.state.kind === "running") running++;
    else if (c.state.kind === "terminated") {
      stopped++;
      if (c.state.exitCode === 0) succeeded++;
    } else if (c.lastTerminated) stopped++;
    else waiting++;
  }
  if (waiting > 0) return "Pending";
  if (running > 0) return "Running";
  if (stopped > 0) {
    if (view.final) return stopped === succeeded ? "Succeeded" : "Failed";
    if (restartPolicy === "Always") return "Running";
    if (stopped === succeeded) return "Succeeded";
    if (restartPolicy === "Never") return "Failed";
    return "Running";
  }
  return "Pending";
}

function terminatedJson(t: Terminated): Record<string, unknown> {
  return {
    exitCode: t.exitCode,
    ...(t.signal !== undefined && { signal: t.signal }),
    reason: t.reason,
    ...(t.message && { message: t.message }),
    ...(t.startedAt && { startedAt: t.startedAt }),
    finishedAt: t.finishedAt,
    ...(t.containerID && { containerID: t.containerID }),
  };
}

function containerJson(c: ContainerView): Record<string, unknown> {
  const s = c.state;
  const state =
    s.kind === "waiting"
      ? { waiting: { reason: s.reason, ...(s.message && { message: s.message }) } }
      : s.kind === "running"
        ? { running: { startedAt: s.startedAt } }
        : { terminated: terminatedJson(s) };
  return {
    name: c.name,
    image: c.image,
    imageID: "",
    ...(c.containerID && { containerID: c.containerID }),
    ready: c.ready,
    started: c.started,
    restartCount: c.restartCount,
    state,
    lastState: c.lastTerminated ? { terminated: terminatedJson(c.lastTerminated) } : {},
  };
}

function names(cs: ContainerView[]): string {
  return `[${cs.map((c) => c.name).join(" ")}]`;
}

/** The status the pod should have; `now` stamps conditions that change. */
export function desiredStatus(pod: V1Pod, view: PodView, now: string): ManagedStatus {
  const phase = podPhase(pod.spec?.restartPolicy ?? "Always", view);
  const current = (pod.status?.conditions ?? []) as unknown as Condition[];
  const condition = (type: string, ok: boolean, reason?: string, message?: string): Condition => {
    const prev = current.find((c) => c.type === type);
    const status = ok ? "True" : "False";
    return {
      type,
      status,
      ...(reason && { reason }),
      ...(message && { message }),
      lastTransitionTime:
        prev && prev.status === status && prev.lastTransitionTime
          ? normalizeTime(prev.lastTransitionTime)
          : now,
      lastProbeTime: null,
    };
  };
  const terminal = phase === "Succeeded" || phase === "Failed";
  const init = initialized(view);
  const pendingInit = view.initContainers.filter(
    (c) => !(c.state.kind === "terminated" && c.state.exitCode === 0),
  );
  const unready = view.containers.filter((c) => !c.ready);
  const gates = (pod.spec?.readinessGates ?? []).map((g) => g.conditionType);
  const missingGate = gates.find((g) => current.find((c) => c.type === g)?.status !== "True");
  const containersReady = !terminal && unready.length === 0;
  const unreadyMessage = `containers with unready status: ${names(unready)}`;
  const own: Condition[] = [
    condition("PodReadyToStartContainers", view.sandboxReady && !terminal),
    init
      ? condition("Initialized", true, terminal ? "PodCompleted" : undefined)
      : condition(
          "Initialized",
          false,
          "ContainersNotInitialized",
          `containers with incomplete status: ${names(pendingInit)}`,
        ),
    ...["ContainersReady", "Ready"].map((type) => {
      if (terminal) return condition(type, false, "PodCompleted");
      if (!containersReady) return condition(type, false, "ContainersNotReady", unreadyMessage);
      if (type === "Ready" && missingGate !== undefined) {
        return condition(
          type,
          false,
          "ReadinessGatesNotReady",
          `the status of pod readiness gate "${missingGate}" is not "True"`,
        );
      }
      return condition(type, true);
    }),
  ];
  const foreign = current
    .filter((c) => !OWN_CONDITIONS.includes(c.type))
    .map((c) => ({
      ...c,
      ...(c.lastTransitionTime && { lastTransitionTime: normalizeTime(c.lastTransitionTime) }),
    }));
  if (!foreign.some((c) => c.type === "PodScheduled")) {
    foreign.unshift({ type: "PodScheduled", status: "True", lastTransitionTime: now, lastProbeTime: null });
  }
  return {
    phase,
    reason: view.rejected?.reason ?? null,
    message: view.rejected?.message ?? null,
    conditions: [...foreign, ...own].map((c) => ({ ...c })),
    hostIP: view.hostIP,
    hostIPs: [{ ip: view.hostIP }],
    podIP: view.podIP ?? null,
    podIPs: view.podIP ? [{ ip: view.podIP }] : null,
    startTime: view.startTime ?? null,
    initContainerStatuses: view.initContainers.map(containerJson),
    containerStatuses: view.containers.map(containerJson),
  };
}

/** A timestamp as the API stores it (whole seconds, UTC); anything else unchanged. */
export function normalizeTime(value: unknown): string {
  if (value instanceof Date) return apiTime(value);
  if (typeof value === "string" && TIME.test(value)) return apiTime(new Date(value));
  return String(value);
}

/** Comparable form: keys sorted, absent/null/empty alike, timestamps at whole seconds. */
function canonical(value: unknown): unknown {
  if (value instanceof Date) return normalizeTime(value);
  if (typeof value === "string") return TIME.test(value) ? normalizeTime(value) : value;
  // The API drops empty lists, so an empty list and none are the same.
  if (Array.isArray(value)) return value.length ? value.map(canonical) : null;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const v = canonical((value as Record<string, unknown>)[k]);
      if (v === undefined || v === null) continue;
      if (typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) continue;
      out[k] = v;
    }
    return out;
  }
  return value;
}

/** Whether the pod's current status differs from `desired` in any field the agent owns. */
export function statusDiffers(current: V1Pod["status"] | undefined, desired: ManagedStatus): boolean {
  const cur = (current ?? {}) as Record<string, unknown>;
  return (Object.keys(desired) as (keyof ManagedStatus)[]).some(
    (k) => JSON.stringify(canonical(cur[k]) ?? null) !== JSON.stringify(canonical(desired[k]) ?? null),
  );
}
