// A local Kubernetes control plane for tests and the lab: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, as processes on a loopback (or given) address, with a
// PKI made for the purpose. Each instance lives in one folder (certs, etcd data, logs, state.json);
// stopping removes the folder, and an instance whose owner process died is reaped on the next start.
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { request as httpRequest } from "node:http";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { makePki, type Pki } from "./certificates.ts";
import { renderKubeconfig } from "./kubeconfig.ts";
import { ensurePortFree, freePort } from "../ports.ts";
import {
  killNow,
  lastLines,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
} from "../processes.ts";

export interface ControlPlaneOptions {
  /** Folder for this instance; created, and removed again by stopControlPlane. */
  dir: string;
  /** Address every component listens on (a lab may use a bridge address instead of loopback). */
  bindAddress?: string;
  /** kube-apiserver's port; a free one when omitted. */
  apiserverPort?: number;
  serviceCidr?: string;
  /** Pod network; the controller-manager hands each Node a /24 of it (flannel's kube-subnet-mgr needs that). */
  podCidr?: string;
  /** The instance counts as stale once this process is gone (test runs); omit for a long-lived one. */
  ownerPid?: number;
  readyTimeoutMs?: number;
}

export interface ComponentState {
  name: string;
  pid: number;
  log: string;
  /** Its command and arguments: what a restart runs again (same data, certificates and ports). */
  argv: string[];
}

export interface ControlPlaneState {
  dir: string;
  server: string;
  /** Admin kubeconfig (system:masters). */
  kubeconfig: string;
  ownerPid?: number;
  components: ComponentState[];
}

const STOP_ORDER = ["kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"];
const BOOTSTRAP_FIX = "run scripts/bootstrap.sh (it builds the Kubernetes binaries and installs etcd-server)";

export class ControlPlaneError extends Error {}

/** Who the API server is when it calls a kubelet. */
const KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client";

/**
 * Starts an instance. Free ports are picked before the daemons bind them, so another process can
 * take one in between; such a lost race is retried with fresh ports (up to three attempts).
 */
export async function startControlPlane(opts: ControlPlaneOptions): Promise<ControlPlaneState> {
  for (let attempt = 1; ; attempt++) {
    try {
      const state = await startOnce(opts);
      await rm(`${opts.dir}.failed-logs`, { recursive: true, force: true });
      return state;
    } catch (err) {
      const lostRace = err instanceof ControlPlaneError && /address already in use/.test(err.message);
      if (!lostRace || opts.apiserverPort !== undefined || attempt === 3) throw err;
    }
  }
}

async function startOnce(opts: ControlPlaneOptions): Promise<ControlPlaneState> {
  const host = opts.bindAddress ?? "127.0.0.1";
  const timeout = opts.readyTimeoutMs ?? 90_000;
  const binaries = {
    etcd: requireCommand("etcd", BOOTSTRAP_FIX),
    apiserver: requireCommand("kube-apiserver", BOOTSTRAP_FIX),
    controllerManager: requireCommand("kube-controller-manager", BOOTSTRAP_FIX),
    scheduler: requireCommand("kube-scheduler", BOOTSTRAP_FIX),
  };
  if (existsSync(join(opts.dir, "state.json"))) {
    throw new ControlPlaneError(
      `a control plane already uses ${opts.dir}: stop it with 'npm run control-plane -- down --dir ${opts.dir}'`,
    );
  }
  const ports = {
    apiserver: opts.apiserverPort
      ? await ensurePortFree(host, opts.apiserverPort, "kube-apiserver --secure-port")
      : await freePort(host),
    etcdClient: await freePort("127.0.0.1"),
    etcdPeer: await freePort("127.0.0.1"),
    controllerManager: await freePort("127.0.0.1"),
    scheduler: await freePort("127.0.0.1"),
  };
  await mkdir(join(opts.dir, "pki"), { recursive: true });
  const state: ControlPlaneState = {
    dir: opts.dir,
    server: `https://${host}:${ports.apiserver}`,
    kubeconfig: join(opts.dir, "admin.kubeconfig"),
    ...(opts.ownerPid !== undefined && { ownerPid: opts.ownerPid }),
    components: [],
  };
  const saveState = () => writeState(state);

  try {
    const serviceCidr = opts.serviceCidr ?? "10.96.0.0/16";
    const pki = await makePki(
      join(opts.dir, "pki"),
      [
        host,
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        firstHost(serviceCidr),
      ],
      [
        { name: "admin", user: "portable-lb-admin", groups: ["system:masters"] },
        { name: "controller-manager", user: "system:kube-controller-manager", groups: [] },
        { name: "scheduler", user: "system:kube-scheduler", groups: [] },
        // The API server's identity at the kubelets (logs, exec, port-forward): bound below to
        // system:kubelet-api-admin, and to nothing else.
        { name: "apiserver-kubelet-client", user: KUBELET_CLIENT_USER, groups: [] },
      ],
    );
    const kubeconfigFor = async (client: string, user: string): Promise<string> => {
      const path = join(opts.dir, `${client}.kubeconfig`);
      const c = pki.clients[client]!;
      await writeFile(
        path,
        renderKubeconfig({
          server: state.server,
          caCertFile: pki.caCert,
          clientCertFile: c.cert,
          clientKeyFile: c.key,
          user,
        }),
        { mode: 0o600 },
      );
      return path;
    };
    await kubeconfigFor("admin", "portable-lb-admin");

    const launch = async (name: string, command: string, args: string[], ready: () => Promise<boolean>) => {
      const log = join(opts.dir, `${name}.log`);
      const pid = startDaemon({ name, command, args, logFile: log });
      state.components.push({ name, pid, log, argv: [command, ...args] });
      await saveState();
      let exited = false;
      const ok = await waitUntil(
        async () => {
          exited = !runs(pid, opts.dir);
          return exited || (await ready());
        },
        timeout,
        200,
      );
      if (!ok || exited) {
        const what = exited ? "exited during start-up" : `did not become ready within ${timeout / 1000} s`;
        throw new ControlPlaneError(
          `control plane: ${name} ${what}; last lines of ${log}:\n${lastLines(log, 20)}`,
        );
      }
    };

    const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`;
    await launch(
      "etcd",
      binaries.etcd,
      [
        "--name=portable-lb",
        `--data-dir=${join(opts.dir, "etcd")}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
        `--initial-cluster=portable-lb=http://127.0.0.1:${ports.etcdPeer}`,
        "--logger=zap",
        "--log-level=warn",
      ],
      async () => (await get(`${etcdUrl}/health`)).body.includes('"health":"true"'),
    );

    await launch(
      "kube-apiserver",
      binaries.apiserver,
      [
        `--etcd-servers=${etcdUrl}`,
        `--bind-address=${host}`,
        `--advertise-address=${host}`,
        `--secure-port=${ports.apiserver}`,
        `--tls-cert-file=${pki.servingCert}`,
        `--tls-private-key-file=${pki.servingKey}`,
        `--client-ca-file=${pki.caCert}`,
        `--service-account-key-file=${pki.serviceAccountPub}`,
        `--service-account-signing-key-file=${pki.serviceAccountKey}`,
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        `--service-cluster-ip-range=${serviceCidr}`,
        "--authorization-mode=Node,RBAC",
        // Kubelets are dialled at their InternalIP: a node's name resolves nowhere in a lab.
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        `--kubelet-client-certificate=${pki.clients["apiserver-kubelet-client"]!.cert}`,
        `--kubelet-client-key=${pki.clients["apiserver-kubelet-client"]!.key}`,
        // On a loopback address the endpoints reconciler would publish an unusable address; on a lab's
        // node network it publishes the one pods reach through the kubernetes Service.
        `--endpoint-reconciler-type=${opts.bindAddress ? "lease" : "none"}`,
        "--profiling=false",
        "--v=1",
      ],
      async () => (await get(`${state.server}/readyz`, clientTls(pki, "admin"))).status === 200,
    );

    const binding = await send(
      `${state.server}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings`,
      { ...clientTls(pki, "admin"), method: "POST" },
      JSON.stringify({
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: "portable-lb:apiserver-kubelet-client" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "system:kubelet-api-admin",
        },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: KUBELET_CLIENT_USER }],
      }),
    );
    if (binding.status !== 201 && binding.status !== 409)
      throw new ControlPlaneError(
        `control plane: could not bind the API server's kubelet client to system:kubelet-api-admin (HTTP ${binding.status}): ${binding.body}`,
      );

    // The controller-manager and the scheduler are API clients with a local health endpoint.
    const launchClient = async (
      name: string,
      command: string,
      client: string,
      port: number,
      extra: string[],
    ) => {
      const kubeconfig = await kubeconfigFor(client, `system:${name}`);
      await launch(
        name,
        command,
        [
          `--kubeconfig=${kubeconfig}`,
          `--authentication-kubeconfig=${kubeconfig}`,
          `--authorization-kubeconfig=${kubeconfig}`,
          "--bind-address=127.0.0.1",
          `--secure-port=${port}`,
          "--leader-elect=false",
          "--profiling=false",
          "--v=1",
          ...extra,
        ],
        // Their self-signed serving certificates: only liveness is probed, no data.
        async () =>
          (await get(`https://127.0.0.1:${port}/healthz`, { rejectUnauthorized: false })).status === 200,
      );
    };
    await launchClient(
      "kube-controller-manager",
      binaries.controllerManager,
      "controller-manager",
      ports.controllerManager,
      [
        "--use-service-account-credentials=true",
        `--service-account-private-key-file=${pki.serviceAccountKey}`,
        `--root-ca-file=${pki.caCert}`,
        `--cluster-signing-cert-file=${pki.caCert}`,
        `--cluster-signing-key-file=${pki.caKey}`,
        `--service-cluster-ip-range=${serviceCidr}`,
        ...(opts.podCidr
          ? ["--allocate-node-cidrs=true", `--cluster-cidr=${opts.podCidr}`, "--node-cidr-mask-size=24"]
          : []),
      ],
    );
    await launchClient("kube-scheduler", binaries.scheduler, "scheduler", ports.scheduler, []);

    // Ready for tests once the controller-manager has given the default namespace its ServiceAccount.
    const sa = `${state.server}/api/v1/namespaces/default/serviceaccounts/default`;
    if (
      !(await waitUntil(async () => (await get(sa, clientTls(pki, "admin"))).status === 200, timeout, 200))
    ) {
      throw new ControlPlaneError(
        `control plane: kube-controller-manager did not create the default ServiceAccount within ${timeout / 1000} s; see ${join(opts.dir, "kube-controller-manager.log")}`,
      );
    }
    return state;
  } catch (err) {
    // Keep the evidence, then leave nothing running and nothing in the instance folder.
    const kept = await keepLogs(opts.dir);
    await stopControlPlane(state);
    const suffix = kept ? `\n(logs kept in ${kept})` : "";
    throw err instanceof ControlPlaneError ? new ControlPlaneError(err.message + suffix) : err;
  }
}

/** Stops the components (scheduler and controller-manager before the apiserver, etcd last) and removes the folder. */
export async function stopControlPlane(state: ControlPlaneState): Promise<void> {
  const ordered = [...state.components].sort(
    (a, b) => STOP_ORDER.indexOf(a.name) - STOP_ORDER.indexOf(b.name),
  );
  for (const c of ordered) await stopProcess(c.pid, state.dir, 15_000);
  await rm(state.dir, { recursive: true, force: true });
}

/** For process-exit handlers: kills what is left of the instance at once. */
export function killControlPlaneNow(state: ControlPlaneState): void {
  for (const c of state.components) killNow(c.pid, state.dir);
}

export async function writeState(state: ControlPlaneState): Promise<void> {
  await writeFile(join(state.dir, "state.json"), JSON.stringify(state, null, 2));
}

/** The components in the order they start (each needs the ones before it). */
export const START_ORDER = [...STOP_ORDER].reverse();

export async function readState(dir: string): Promise<ControlPlaneState | undefined> {
  try {
    return JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as ControlPlaneState;
  } catch {
    return undefined;
  }
}

/**
 * Stops instances under `root` whose owner process has exited (a test run killed before its
 * teardown) or whose components have all died, so ports, memory and folders do not pile up.
 * Returns one line per instance it cleaned.
 */
export async function reapStale(root: string): Promise<string[]> {
  const lines: string[] = [];
  for (const name of existsSync(root) ? await readdir(root) : []) {
    const state = await readState(join(root, name));
    if (!state) continue;
    const alive = state.components.filter((c) => runs(c.pid, state.dir));
    const ownerGone = state.ownerPid !== undefined && !runs(state.ownerPid, "");
    if (alive.length > 0 && !ownerGone) continue;
    await stopControlPlane(state);
    lines.push(
      `control plane: removed a stale instance from an earlier run in ${state.dir}` +
        (alive.length ? ` (stopped pids ${alive.map((c) => c.pid).join(", ")})` : ""),
    );
  }
  return lines;
}

function firstHost(cidr: string): string {
  const [base] = cidr.split("/");
  const octets = base!.split(".").map(Number);
  octets[3] = octets[3]! + 1;
  return octets.join(".");
}

interface Tls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized?: boolean;
}

function clientTls(pki: Pki, client: string): Tls {
  const c = pki.clients[client]!;
  return { ca: readFileSync(pki.caCert), cert: readFileSync(c.cert), key: readFileSync(c.key) };
}

/** One bounded GET; connection errors count as "not ready yet" (status 0). */
function get(url: string, tls: Tls = {}): Promise<{ status: number; body: string }> {
  return send(url, { ...tls, method: "GET" });
}

/** One bounded request with an optional JSON body; a connection error is status 0. */
function send(
  url: string,
  opts: Tls & { method: string },
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const call = url.startsWith("https:") ? request : httpRequest;
    const headers = body === undefined ? {} : { "content-type": "application/json" };
    const req = call(url, { timeout: 2_000, headers, ...opts }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve({ status: 0, body: "" }));
    req.end(body);
  });
}

async function keepLogs(dir: string): Promise<string | undefined> {
  const logs = existsSync(dir) ? (await readdir(dir)).filter((f) => f.endsWith(".log")) : [];
  if (logs.length === 0) return undefined;
  const kept = `${dir}.failed-logs`;
  await mkdir(kept, { recursive: true });
  for (const f of logs) await writeFile(join(kept, f), await readFile(join(dir, f)));
  return kept;
}

/** Where instances live: beside the tool cache, so stale ones from any clone are found and reaped. */
export function instancesRoot(): string {
  const cache =
    process.env.PORTABLE_LB_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "portable-lb");
  return join(cache, "control-planes");
}
