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
    const dir = labDir(plan);
    const socket = join(dir, "api.sock");
    const forwarder = sibling("forwarder");
    const inside = labNamespace(plan, cp.netns, forwarders);
    await inside.spawn(
      "api-forwarder",
      process.execPath,
      [...NODE_FLAGS, forwarder, "--listen", `unix:${socket}`, "--connect", `tcp:${cp.ip}:${API_PORT}`],
      { marker: `${forwarder} --listen unix:${socket}` },
    );
    const hostPort = cp.hostPort || (await freePort("127.0.0.1"));
    const listen = `tcp:127.0.0.1:${hostPort}`;
    const logFile = join(dir, "host-api-forwarder.log");
    const args = [...NODE_FLAGS, forwarder, "--listen", listen, "--connect", `unix:${socket}`];
    const pid = startDaemon({ name: "host-api-forwarder", command: process.execPath, args, logFile });
    forwarders.push({
      name: "host-api-forwarder",
      pid,
      marker: `${forwarder} --listen ${listen}`,
      netns: "",
      logFile,
    });
    if (!(await waitUntil(() => connectsTo("127.0.0.1", hostPort), 15_000, 100)))
      throw new Error(
        `lab ${plan.name}: the API server is not reachable on 127.0.0.1:${hostPort}; see ${logFile}`,
      );

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

export async function healthy({ plan }: ControlPlaneSpec, state: ControlPlaneState): Promise<boolean> {
  const instance = await readState(controlPlaneDir(plan));
  return (
    namespaceExists(plan.controlPlane.netns) &&
    instance !== undefined &&
    instance.components.every((c) => runs(c.pid, instance.dir)) &&
    state.forwarders.every((f) => runs(f.pid, f.marker))
  );
}

/** Whether update() can heal it: the same spec, and its namespace, state and forwarders are there. */
export async function updatable(
  olds: ControlPlaneSpec,
  { plan, network }: ControlPlaneSpec,
  state: ControlPlaneState,
): Promise<boolean> {
  const instance = await readState(controlPlaneDir(plan));
  return (
    isDeepStrictEqual(olds, { plan, network }) &&
    namespaceExists(plan.controlPlane.netns) &&
    instance !== undefined &&
    state.forwarders.every((f) => runs(f.pid, f.marker))
  );
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
    c.pid = startDaemon({ name, command: "nsenter", args: [netns, "--", ...c.argv], logFile: c.log });
    await writeState(instance);
    // Up for a moment, and the API server answering again, before the next one that needs it.
    await new Promise((r) => setTimeout(r, 1_000));
    if (!runs(c.pid, instance.dir))
      throw new Error(`lab ${plan.name}: ${name} exited during its restart; see ${c.log}`);
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
  if (!(await waitUntil(answers, 60_000, 500)))
    throw new Error(`lab ${plan.name}: the API server did not answer within 60 s of its restart`);
  return state;
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
