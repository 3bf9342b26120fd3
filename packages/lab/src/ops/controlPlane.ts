// The lab's control plane: etcd, kube-apiserver, the controller-manager and the scheduler inside
// the control plane's namespace, at its node-network address, where nodes and pods reach them.
// This machine reaches the API server on 127.0.0.1 through two forwarders joined by a unix socket
// (../forwarder.ts), so nothing listens outside a loopback or the lab's own namespaces.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { extname, join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { readState, START_ORDER, stopControlPlane, writeState } from "../controlPlane/controlPlane.ts";
import { API_PORT, type LabPlan } from "../labPlan.ts";
import { stopRecorded, type ProcessRecord } from "../netns/netnsLab.ts";
import { freePort } from "../ports.ts";
import { findByMarker, runs, startDaemon, waitUntil } from "../processes.ts";
import { controlPlaneDir, labDir, labNamespace, namespaceExists } from "./fabric.ts";
import { connectsTo } from "./probes.ts";

export interface ControlPlaneSpec {
  plan: LabPlan;
  /** The network's instance: a new network means a new control plane. */
  network: string;
}

export interface ControlPlaneState {
  instance: string;
  /** Admin kubeconfig for this machine (server https://127.0.0.1:<hostPort>); the file, not its keys, goes into Pulumi's state. */
  kubeconfigFile: string;
  hostPort: number;
  forwarders: ProcessRecord[];
}

const RESTART_BOUND_MS = 90_000;
const NODE_FLAGS = ["--disable-warning=MODULE_TYPELESS_PACKAGE_JSON"];
const sibling = (path: string) => join(__dirname, "..", `${path}${extname(__filename)}`);

export async function create({ plan }: ControlPlaneSpec): Promise<ControlPlaneState> {
  await remove({ plan, network: "" }, undefined);
  const cp = plan.controlPlane;
  const ns = labNamespace(plan, cp.netns);
  const printed = await ns.run(
    process.execPath,
    [
      ...NODE_FLAGS,
      sibling("controlPlane/cli"),
      ...["up", "--name", plan.name, "--bind", cp.ip, "--port", String(API_PORT)],
      ...["--pod-cidr", plan.podCidr, "--service-cidr", plan.serviceCidr],
    ],
    { timeoutMs: 180_000 },
  );
  const adminFile = printed.trim().split("\n").pop()!;

  const forwarders: ProcessRecord[] = [];
  try {
    const hostPort = await startForwarders(plan, cp.hostPort || (await freePort("127.0.0.1")), forwarders);
    const dir = labDir(plan);
    const admin = JSON.parse(readFileSync(adminFile, "utf8")) as {
      clusters: { cluster: { server: string } }[];
    };
    for (const c of admin.clusters) c.cluster.server = `https://127.0.0.1:${hostPort}`;
    const kubeconfigFile = join(dir, "admin.kubeconfig");
    writeFileSync(kubeconfigFile, JSON.stringify(admin, null, 2), { mode: 0o600 });
    return { instance: `${plan.name}-${Date.now()}`, kubeconfigFile, hostPort, forwarders };
  } catch (err) {
    await remove({ plan, network: "" }, { forwarders } as ControlPlaneState);
    throw err;
  }
}

/**
 * Starts the forwarders from this machine's 127.0.0.1:`hostPort` to the API server that `records`
 * (updated in place) does not show alive, the one in the namespace first; returns the port.
 */
async function startForwarders(plan: LabPlan, hostPort: number, records: ProcessRecord[]): Promise<number> {
  const cp = plan.controlPlane;
  const dir = labDir(plan);
  const socket = join(dir, "api.sock");
  const forwarder = sibling("forwarder");
  const alive = (name: string) => records.some((r) => r.name === name && runs(r.pid, r.marker));
  const keep = records.filter((r) => runs(r.pid, r.marker));
  records.splice(0, records.length, ...keep);
  if (!alive("api-forwarder")) {
    rmSync(socket, { force: true });
    await labNamespace(plan, cp.netns, records).spawn(
      "api-forwarder",
      process.execPath,
      [...NODE_FLAGS, forwarder, "--listen", `unix:${socket}`, "--connect", `tcp:${cp.ip}:${API_PORT}`],
      { marker: `${forwarder} --listen unix:${socket}` },
    );
  }
  const listen = `tcp:127.0.0.1:${hostPort}`;
  const logFile = join(dir, "host-api-forwarder.log");
  if (!alive("host-api-forwarder")) {
    const args = [...NODE_FLAGS, forwarder, "--listen", listen, "--connect", `unix:${socket}`];
    const pid = startDaemon({ name: "host-api-forwarder", command: process.execPath, args, logFile });
    records.push({
      name: "host-api-forwarder",
      pid,
      marker: `${forwarder} --listen ${listen}`,
      netns: "",
      logFile,
    });
  }
  if (!(await waitUntil(() => connectsTo("127.0.0.1", hostPort), 15_000, 100)))
    throw new Error(
      `lab ${plan.name}: the API server is not reachable on 127.0.0.1:${hostPort}; see ${logFile}`,
    );
  return hostPort;
}

export async function healthy({ plan }: ControlPlaneSpec, state: ControlPlaneState): Promise<boolean> {
  const instance = await readState(controlPlaneDir(plan));
  return (
    namespaceExists(plan.controlPlane.netns) &&
    instance !== undefined &&
    instance.components.every((c) => runs(c.pid, instance.dir)) &&
    state.forwarders.every((f) => runs(f.pid, f.marker))
  );
}

/**
 * Whether update() can heal it: the same spec, with its data (etcd's, the certificates) kept, as
 * after a crash or a reboot: the network's heal has made its namespace again by then.
 */
export async function updatable(
  olds: ControlPlaneSpec,
  { plan, network }: ControlPlaneSpec,
  state: ControlPlaneState,
): Promise<boolean> {
  const instance = await readState(controlPlaneDir(plan));
  return isDeepStrictEqual(olds, { plan, network }) && instance !== undefined && state.hostPort > 0;
}

/**
 * Restarts whichever of etcd, kube-apiserver, the controller-manager and the scheduler died, in
 * their namespace with their data, certificates and ports as before (what systemd or the kubelet's
 * static pods do for a kubeadm control plane); nodes, pods and the cluster's objects stay as they are.
 */
export async function update(
  _olds: ControlPlaneSpec,
  { plan }: ControlPlaneSpec,
  state: ControlPlaneState,
): Promise<ControlPlaneState> {
  const instance = (await readState(controlPlaneDir(plan)))!;
  const netns = `--net=/run/netns/${plan.controlPlane.netns}`;
  for (const name of START_ORDER) {
    const c = instance.components.find((x) => x.name === name);
    if (!c || runs(c.pid, instance.dir)) continue;
    // One restarted by an earlier repair that was never recorded (it failed later) is adopted.
    const orphan = findByMarker(c.argv.join(" "));
    if (orphan !== undefined) {
      c.pid = orphan;
      continue;
    }
    // As systemd's Restart=on-failure: one that needs the API server fully up (the controller-manager
    // reads RBAC-guarded config at start, which a just-restarted API server may not serve yet) is
    // started again until it stays up, within a bound.
    const stays = async () => {
      c.pid = startDaemon({ name, command: "nsenter", args: [netns, "--", ...c.argv], logFile: c.log });
      await writeState(instance);
      await new Promise((r) => setTimeout(r, 2_000));
      return runs(c.pid, instance.dir);
    };
    if (!(await waitUntil(stays, RESTART_BOUND_MS, 1_000)))
      throw new Error(
        `lab ${plan.name}: ${name} kept exiting for ${RESTART_BOUND_MS / 1000} s after its restart; see ${c.log}`,
      );
  }
  // Through this machine's forwarder, as every client here: etcd and the API server both answering.
  const kc = new KubeConfig();
  kc.loadFromFile(state.kubeconfigFile);
  const core = kc.makeApiClient(CoreV1Api);
  const answers = () =>
    core.readNamespace({ name: "default" }).then(
      () => true,
      () => false,
    );
  const forwarders = [...state.forwarders];
  await startForwarders(plan, state.hostPort, forwarders);
  if (!(await waitUntil(answers, 60_000, 500)))
    throw new Error(`lab ${plan.name}: the API server did not answer within 60 s of its restart`);
  return { ...state, forwarders };
}

export async function remove(
  { plan }: ControlPlaneSpec,
  state: ControlPlaneState | undefined,
): Promise<void> {
  for (const f of state?.forwarders ?? []) await stopRecorded(f, 5_000);
  const instance = await readState(controlPlaneDir(plan));
  if (instance) await stopControlPlane(instance);
  rmSync(join(labDir(plan), "admin.kubeconfig"), { force: true });
}
