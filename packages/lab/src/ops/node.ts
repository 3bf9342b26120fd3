// One lab node: a namespace on the node network running a real Kubernetes node (../node: containerd
// with runc, the kubelet and kube-proxy), with every image the lab's pods use imported into its
// containerd. The kubelet authenticates as system:node:<name> (the Node authorizer limits it to its
// own Node and pods), kube-proxy as system:kube-proxy; both certificates come from the control
// plane's CA.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { isDeepStrictEqual } from "node:util";
import { LB_POD_SYSCTLS } from "@portable-lb/core";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { API_PORT, type LabNodePlan, type LabPlan } from "../labPlan.ts";
import { KubeletNode, type KubeletNodeSpec, type NodeProcess } from "../node/kubeletNode.ts";
import { labImage } from "../node/labImages.ts";
import { removeCgroupRoot } from "../node/nodeCgroups.ts";
import { writeNodeCredentials } from "../node/nodeCredentials.ts";
import { nodeLayout, type NodeLayout } from "../node/nodeLayout.ts";
import { deleteNamespacesNow } from "../netns/netnsLab.ts";
import { lastLines, runs, waitUntil } from "../processes.ts";
import { controlPlaneDir, ensurePlugged, hasLink, labDir } from "./fabric.ts";

export interface NodeSpec {
  plan: LabPlan;
  node: string;
  /** The control plane's instance: a new control plane means new node credentials and a new node. */
  controlPlane: string;
  /** This machine's admin kubeconfig file, to wait for the Node to be Ready. */
  adminKubeconfig: string;
  /** The OCI archives its containerd imports (their paths name their builds). */
  images: string[];
}

export interface NodeState {
  /** containerd, the kubelet, kube-proxy and the mount namespace's holder, by pid. */
  processes: NodeProcess[];
}

const READY_TIMEOUT_MS = 180_000;
const STACK_SCOPE_PREFIX = "stack";

function nodeOf(plan: LabPlan, name: string): LabNodePlan {
  const node = plan.nodes.find((n) => n.name === name);
  if (!node) throw new Error(`lab ${plan.name}: no node ${name} in the plan`);
  return node;
}

/** The cgroup scope of a lab stack's nodes (a-z0-9 only: the reaper reads it back from cgroup names). */
function stackScope(labName: string): string {
  return STACK_SCOPE_PREFIX + labName.replace(/[^a-z0-9]/g, "");
}

export function layoutOf(plan: LabPlan, name: string): NodeLayout {
  return nodeLayout(join(labDir(plan), name), name, stackScope(plan.name));
}

/** What the node's kubelet, containerd and kube-proxy are started with. */
async function kubeletSpec(spec: NodeSpec): Promise<KubeletNodeSpec> {
  const { plan } = spec;
  const node = nodeOf(plan, spec.node);
  const layout = layoutOf(plan, node.name);
  mkdirSync(layout.dir, { recursive: true });
  const pkiDir = join(controlPlaneDir(plan), "pki");
  await writeNodeCredentials({ layout, pkiDir, server: `https://${plan.controlPlane.ip}:${API_PORT}` });
  return {
    layout,
    netns: node.netns,
    nodeIp: node.ip,
    clientCaFile: join(pkiDir, "ca.crt"),
    clusterCidr: plan.podCidr,
    // A plan recorded before the lab had cluster DNS has none.
    ...(plan.clusterDns !== undefined && { clusterDns: [plan.clusterDns] }),
    images: spec.images,
    sandboxImage: labImage("pause").ref,
    labels: node.labels,
    // As a user's LB nodes must (README): the LB pods forward in their own network namespace.
    ...(node.role === "lb" && { allowedUnsafeSysctls: LB_POD_SYSCTLS }),
  };
}

/** Waits for the node to be Ready, or fails with the evidence (after `onFail`). */
async function awaitReady(spec: NodeSpec, kubelet: KubeletNode, onFail?: () => Promise<void>): Promise<void> {
  if (await nodeReady(spec.adminKubeconfig, spec.node, kubelet)) return;
  const dead = kubelet.processes.find((p) => !runs(p.pid, p.marker));
  const why = dead
    ? `its ${dead.name} exited; last lines of its log:\n${lastLines(dead.logFile, 20)}`
    : `it was not Ready within ${READY_TIMEOUT_MS / 1000} s; last lines of its kubelet's log:\n${lastLines(join(kubelet.layout.logs, "kubelet.log"), 20)}`;
  // The evidence may go with the node's folder: quoted first.
  await onFail?.();
  throw new Error(`lab ${spec.plan.name}: node ${spec.node} did not come up: ${why}`);
}

export async function create(spec: NodeSpec): Promise<NodeState> {
  const { plan } = spec;
  const node = nodeOf(plan, spec.node);
  await remove(spec, undefined);
  await ensurePlugged(plan, node.netns, { fabricIface: node.fabricIface, ip: node.ip, forwarding: true });
  const kubelet = await KubeletNode.start(await kubeletSpec(spec));
  const state = { processes: kubelet.processes };
  await awaitReady(spec, kubelet, () => remove(spec, state));
  return state;
}

function adminApi(adminKubeconfig: string): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(adminKubeconfig);
  return kc.makeApiClient(CoreV1Api);
}

async function nodeReady(adminKubeconfig: string, name: string, kubelet: KubeletNode): Promise<boolean> {
  const api = adminApi(adminKubeconfig);
  return waitUntil(
    async () => {
      if (!kubelet.running()) return true; // reported by the check below
      try {
        const n = await api.readNode({ name });
        return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
      } catch {
        return false;
      }
    },
    READY_TIMEOUT_MS,
    500,
  ).then((ok) => ok && kubelet.running());
}

export async function healthy(spec: NodeSpec, state: NodeState): Promise<boolean> {
  const node = nodeOf(spec.plan, spec.node);
  return (
    (await hasLink(spec.plan, node.netns, "eth0")) &&
    KubeletNode.attach(layoutOf(spec.plan, node.name), state.processes).running()
  );
}

/**
 * Whether update() can bring the node to `news` in place: only its images changed (a rebuilt LB
 * image, say), or nothing did, and its folder is there (after a crash or a reboot too: the node is
 * then started again over its folder, as a rebooted machine over its disk).
 */
export function updatable(olds: NodeSpec, news: NodeSpec): boolean {
  return (
    isDeepStrictEqual({ ...olds, images: [] }, { ...news, images: [] }) &&
    existsSync(layoutOf(news.plan, news.node).kubeletKubeconfig)
  );
}

/**
 * Heals the node in place, keeping its Node object, folder and images: plugs it in again where its
 * link went, starts it again where its mount namespace went (a crash or a reboot: the kubelet then
 * brings its pods back), or else restarts a dead containerd, kubelet or kube-proxy (the pods keep
 * running); then imports the images it does not have yet and waits for Ready.
 */
export async function update(olds: NodeSpec, spec: NodeSpec, state: NodeState): Promise<NodeState> {
  const node = nodeOf(spec.plan, spec.node);
  await ensurePlugged(spec.plan, node.netns, {
    fabricIface: node.fabricIface,
    ip: node.ip,
    forwarding: true,
  });
  let kubelet = KubeletNode.attach(layoutOf(spec.plan, spec.node), state.processes);
  // A spec recorded before the images were part of it has none.
  const had = (olds.images as string[] | undefined) ?? [];
  if (kubelet.healable()) {
    await kubelet.restartDead();
    await awaitReady(spec, kubelet);
    await kubelet.importImages(spec.images.filter((i) => !had.includes(i)));
  } else {
    kubelet = await KubeletNode.restart(await kubeletSpec(spec), state.processes);
    await awaitReady(spec, kubelet);
  }
  return { processes: kubelet.processes };
}

export async function remove(spec: NodeSpec, state: NodeState | undefined): Promise<void> {
  const node = nodeOf(spec.plan, spec.node);
  const layout = layoutOf(spec.plan, node.name);
  // As a node that fails: its processes and pods stop (the kubelet first, so it restarts nothing).
  if (state) await KubeletNode.attach(layout, state.processes).stop();
  deleteNamespacesNow([node.netns], `lab ${spec.plan.name}`);
  // What a half-made or unrecorded node left: its pods, under its cgroup root.
  await removeCgroupRoot(layout.cgroupRoot);
  // The Node goes too (the control plane may already be gone with the whole lab: nothing to do then).
  if (existsSync(spec.adminKubeconfig))
    await adminApi(spec.adminKubeconfig)
      .deleteNode({ name: node.name })
      .catch(() => undefined);
  rmSync(layout.dir, { recursive: true, force: true });
}
