// Startup, liveness and readiness probes and lifecycle hooks, with the kubelet's rules: a probe runs
// first initialDelaySeconds after the container started, then every periodSeconds, each attempt
// bounded by timeoutSeconds; its result flips only after successThreshold successes or
// failureThreshold failures in a row. Readiness starts as failed, liveness as passed, and neither
// runs before a startup probe has passed. Every check runs inside the pod: httpGet and tcpSocket in
// the pod's network namespace (nsenter), exec in all of the container's namespaces as its user.
import type { V1ContainerPort, V1LifecycleHandler, V1Probe } from "@kubernetes/client-node";
import { run } from "./run.ts";

export type ProbeKind = "startup" | "liveness" | "readiness";

export interface ProbeTiming {
  initialDelayMs: number;
  periodMs: number;
  timeoutMs: number;
  successThreshold: number;
  failureThreshold: number;
}

export function probeTiming(p: V1Probe): ProbeTiming {
  return {
    initialDelayMs: (p.initialDelaySeconds ?? 0) * 1000,
    periodMs: (p.periodSeconds ?? 10) * 1000,
    timeoutMs: (p.timeoutSeconds ?? 1) * 1000,
    successThreshold: p.successThreshold ?? 1,
    failureThreshold: p.failureThreshold ?? 3,
  };
}

/** When the next attempt is due: initialDelay after the start, then one period after the last attempt began. */
export function nextProbeAt(timing: ProbeTiming, startedAt: number, lastRunAt: number | undefined): number {
  return lastRunAt === undefined ? startedAt + timing.initialDelayMs : lastRunAt + timing.periodMs;
}

/** The consecutive-result counting of one probe of one container run. */
export class ProbeTracker {
  readonly timing: ProbeTiming;
  /** Readiness starts failed, liveness passed, startup failed (not started yet). */
  passed: boolean;
  #last: boolean | undefined;
  #run = 0;

  /** `passed` overrides the initial result (a readiness probe of an adopted container that was ready). */
  constructor(kind: ProbeKind, timing: ProbeTiming, passed = kind === "liveness") {
    this.timing = timing;
    this.passed = passed;
  }

  /** Records one attempt; returns true when the probe's result changed. */
  record(ok: boolean): boolean {
    this.#run = ok === this.#last ? this.#run + 1 : 1;
    this.#last = ok;
    const threshold = ok ? this.timing.successThreshold : this.timing.failureThreshold;
    if (this.#run < threshold || ok === this.passed) return false;
    this.passed = ok;
    return true;
  }
}

export interface ProbeTools {
  nsenter: string;
  curl: string;
  bash: string;
  timeout: string;
}

export interface HandlerTarget {
  /** A process in the pod's network namespace (the container's PID 1). */
  pid: number;
  /** The default host of httpGet and tcpSocket. */
  podIP: string;
  ports: V1ContainerPort[];
  /** Runs a command inside the container (as its exec probes and hooks do). */
  exec: (argv: string[], timeoutMs: number) => Promise<{ code: number; output: string }>;
  tools: ProbeTools;
}

export interface HandlerResult {
  ok: boolean;
  /** Why it failed (or the exec output), for events and logs. */
  detail: string;
}

/** A named port ("health") as the container declares it, or the number itself. */
export function resolvePort(port: number | string, ports: V1ContainerPort[]): number | undefined {
  if (typeof port === "number") return port;
  if (/^[0-9]+$/.test(port)) return Number(port);
  return ports.find((p) => p.name === port)?.containerPort;
}

/** The curl command line of an httpGet check (status codes 200-399 pass, as the kubelet counts them). */
export function httpGetArgs(
  h: NonNullable<V1Probe["httpGet"]>,
  port: number,
  podIP: string,
  timeoutMs: number,
): string[] {
  const scheme = (h.scheme ?? "HTTP").toLowerCase();
  const host = h.host || podIP;
  const path = h.path ? (h.path.startsWith("/") ? h.path : `/${h.path}`) : "/";
  const headers = (h.httpHeaders ?? []).flatMap((x) => ["-H", `${x.name}: ${x.value}`]);
  return [
    "-q",
    "-s",
    "-o",
    "/dev/null",
    "-w",
    "%{http_code}",
    "--noproxy",
    "*",
    // The kubelet does not verify a probe target's certificate either.
    "-k",
    "--max-time",
    String(timeoutMs / 1000),
    "-A",
    "kube-probe/lab",
    ...headers,
    `${scheme}://${host}:${port}${path}`,
  ];
}

/** Runs a probe's or a hook's handler once, bounded by `timeoutMs`. */
export async function runHandler(
  handler: V1Probe | V1LifecycleHandler,
  target: HandlerTarget,
  timeoutMs: number,
): Promise<HandlerResult> {
  const { tools } = target;
  const inNetns = (argv: string[]) =>
    run(tools.nsenter, [`--target=${target.pid}`, "--net", "--", ...argv], { timeoutMs: timeoutMs + 1_000 });
  if (handler.exec) {
    const r = await target.exec(handler.exec.command ?? [], timeoutMs);
    if (r.code === 124) return { ok: false, detail: `command timed out after ${timeoutMs / 1000}s` };
    return { ok: r.code === 0, detail: r.code === 0 ? r.output : `exit ${r.code}: ${r.output.trim()}` };
  }
  if (handler.httpGet) {
    const port = resolvePort(handler.httpGet.port, target.ports);
    if (port === undefined) return { ok: false, detail: `no container port named "${handler.httpGet.port}"` };
    const r = await inNetns([tools.curl, ...httpGetArgs(handler.httpGet, port, target.podIP, timeoutMs)]);
    const status = Number(r.stdout.trim());
    if (status >= 200 && status < 400) return { ok: true, detail: `HTTP ${status}` };
    return {
      ok: false,
      detail: status
        ? `HTTP probe failed with statuscode: ${status}`
        : `HTTP request failed (curl exit ${r.code})`,
    };
  }
  if (handler.tcpSocket) {
    const port = resolvePort(handler.tcpSocket.port, target.ports);
    if (port === undefined)
      return { ok: false, detail: `no container port named "${handler.tcpSocket.port}"` };
    const host = handler.tcpSocket.host || target.podIP;
    // bash's /dev/tcp connects and closes: a connection accepted is a pass, as for the kubelet.
    const connect = 'exec 3<>"/dev/tcp/$1/$2"';
    const r = await inNetns([
      tools.timeout,
      String(timeoutMs / 1000),
      tools.bash,
      "-c",
      connect,
      "tcp",
      host,
      String(port),
    ]);
    return r.code === 0
      ? { ok: true, detail: "connected" }
      : { ok: false, detail: `dial tcp ${host}:${port} failed${r.code === 124 ? ": timeout" : ""}` };
  }
  return { ok: false, detail: "the handler has no exec, httpGet or tcpSocket" };
}
