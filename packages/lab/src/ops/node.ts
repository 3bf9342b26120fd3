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
import { KubeletNode, type NodeProcess } from "../node/kubeletNode.ts";
import { labImage } from "../node/labImages.ts";
import { removeCgroupRoot } from "../node/nodeCgroups.ts";
import { writeNodeCredentials } from "../node/nodeCredentials.ts";
import { nodeLayout, type NodeLayout } from "../node/nodeLayout.ts";
import { deleteNamespacesNow } from "../netns/netnsLab.ts";
import { lastLines, runs, waitUntil } from "../processes.ts";
import { controlPlaneDir, freshNamespace, labDir, namespaceExists, plugIntoNodeNetwork } from "./fabric.ts";

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

export async function create(spec: NodeSpec): Promise<NodeState> {
  const { plan } = spec;
  const node = nodeOf(plan, spec.node);
  await remove(spec, undefined);
  const ns = await freshNamespace(plan, node.netns, true);
  await plugIntoNodeNetwork(plan, ns, node.fabricIface, node.ip);

  const layout = layoutOf(plan, node.name);
  mkdirSync(layout.dir, { recursive: true });
  const pkiDir = join(controlPlaneDir(plan), "pki");
  await writeNodeCredentials({ layout, pkiDir, server: `https://${plan.controlPlane.ip}:${API_PORT}` });
  const kubelet = await KubeletNode.start({
    layout,
    netns: node.netns,
    nodeIp: node.ip,
    clientCaFile: join(pkiDir, "ca.crt"),
    clusterCidr: plan.podCidr,
    images: spec.images,
    sandboxImage: labImage("pause").ref,
    labels: node.labels,
    // As a user's LB nodes must (README): the LB pods forward in their own network namespace.
    ...(node.role === "lb" && { allowedUnsafeSysctls: LB_POD_SYSCTLS }),
  });
  const state = { processes: kubelet.processes };
  if (!(await nodeReady(spec.adminKubeconfig, node.name, kubelet))) {
    // The evidence goes with the node's folder: quote it first.
    const dead = kubelet.processes.find((p) => !runs(p.pid, p.marker));
    const why = dead
      ? `its ${dead.name} exited; last lines of its log:\n${lastLines(dead.logFile, 20)}`
      : `it was not Ready within ${READY_TIMEOUT_MS / 1000} s; last lines of its kubelet's log:\n${lastLines(join(layout.logs, "kubelet.log"), 20)}`;
    await remove(spec, state);
    throw new Error(`lab ${plan.name}: node ${node.name} did not come up: ${why}`);
  }
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

export function healthy(spec: NodeSpec, state: NodeState): boolean {
  const node = nodeOf(spec.plan, spec.node);
  return (
    namespaceExists(node.netns) &&
    KubeletNode.attach(layoutOf(spec.plan, node.name), state.processes).running()
  );
}

/**
 * Whether update() can bring the node to `news` in place: only its images changed (a rebuilt LB
 * image, say), and its namespaces are there.
 */
export function updatable(olds: NodeSpec, news: NodeSpec, state: NodeState): boolean {
  const node = nodeOf(news.plan, news.node);
  return (
    isDeepStrictEqual({ ...olds, images: [] }, { ...news, images: [] }) &&
    namespaceExists(node.netns) &&
    KubeletNode.attach(layoutOf(news.plan, node.name), state.processes).healable()
  );
}

/**
 * Restarts a dead containerd, kubelet or kube-proxy in place (the pods keep running), imports the
 * images the node does not have yet, then waits for Ready.
 */
export async function update(olds: NodeSpec, spec: NodeSpec, state: NodeState): Promise<NodeState> {
  const kubelet = KubeletNode.attach(layoutOf(spec.plan, spec.node), state.processes);
  await kubelet.restartDead();
  if (!(await nodeReady(spec.adminKubeconfig, spec.node, kubelet)))
    throw new Error(
      `lab ${spec.plan.name}: node ${spec.node} was not Ready within ${READY_TIMEOUT_MS / 1000} s of its repair`,
    );
  // A spec recorded before the images were part of it has none.
  const had = (olds.images as string[] | undefined) ?? [];
  await kubelet.importImages(spec.images.filter((i) => !had.includes(i)));
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
