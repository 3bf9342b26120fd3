// The lab's pods and node processes as this machine sees them, for tests that break them as a fault
// would: a pod (from the API), its containers' PID 1 (from the node's runc state, by the container ID
// the kubelet reports) and a node's kubelet (by its command line).
import type { CoreV1Api, V1Pod } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { findByMarker, labNodeLayout, type LabPlan } from "@portable-lb/lab";

export interface LabPod {
  node: string;
  pod: V1Pod;
}

/** The one running pod on `node` in `namespace` whose name starts with `prefix`. */
export async function podOn(
  core: CoreV1Api,
  node: string,
  namespace: string,
  prefix: string,
): Promise<LabPod> {
  const pods = await core.listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${node}` });
  const found = pods.items.filter(
    (p) =>
      p.metadata?.name?.startsWith(prefix) &&
      !p.metadata.deletionTimestamp &&
      p.status?.containerStatuses?.some((c) => c.state?.running),
  );
  if (found.length !== 1) throw new Error(`${found.length} running pods named ${prefix}* on ${node}`);
  return { node, pod: found[0]! };
}

/** The PID 1 of a container of the pod, from the runc state its node's containerd keeps. */
export function containerPid(plan: LabPlan, pod: LabPod, container: string): number {
  const status = pod.pod.status?.containerStatuses?.find((c) => c.name === container);
  const id = status?.containerID?.replace(/^containerd:\/\//, "");
  if (!id) throw new Error(`${pod.pod.metadata?.name}: container ${container} has no ID`);
  // containerd's runc shim keeps each container's state under its namespace (k8s.io, the CRI's).
  const state = join(labNodeLayout(plan, pod.node).runcRoot, "k8s.io", id, "state.json");
  return (JSON.parse(readFileSync(state, "utf8")) as { init_process_pid: number }).init_process_pid;
}

/** The kubelet's process on `node` (its command line names the node's kubelet folder). */
export function kubeletPid(plan: LabPlan, node: string): number {
  const pid = findByMarker(`--root-dir=${labNodeLayout(plan, node).kubeletRoot}`);
  if (pid === undefined) throw new Error(`lab ${plan.name}: no kubelet runs for ${node}`);
  return pid;
}
