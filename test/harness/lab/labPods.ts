// The lab's pods and kubelet stand-ins as this machine sees them, for tests that break them as a
// fault would: each node's agent (its process, found by command line), and each pod's record in its
// agent's state folder (network namespace, and each container's PID 1).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { labDir, type LabPlan } from "@portable-lb/lab";
import { loadRecords, type PodRecord } from "@portable-lb/lab/agent";

export interface LabPod {
  node: string;
  record: PodRecord;
}

/** The pods the stand-in on `node` runs now (records of pods that have gone are skipped). */
export function podsOn(plan: LabPlan, node: string): LabPod[] {
  return loadRecords(join(labDir(plan), node, "state"))
    .filter(({ record }) => record.namespace !== "")
    .map(({ record }) => ({ node, record }));
}

/** The one running pod on `node` whose name starts with `prefix` (e.g. "portable-lb-controller-"). */
export function podOn(plan: LabPlan, node: string, prefix: string): LabPod {
  const found = podsOn(plan, node).filter(
    (p) => p.record.name.startsWith(prefix) && Object.values(p.record.containers).some((c) => c.running),
  );
  if (found.length !== 1)
    throw new Error(`lab ${plan.name}: ${found.length} running pods named ${prefix}* on ${node}`);
  return found[0]!;
}

/** The PID 1 of a container of the pod, as its record has it. */
export function containerPid(pod: LabPod, container: string): number {
  const pid = pod.record.containers[container]?.running?.init?.pid;
  if (pid === undefined) throw new Error(`${pod.record.name}: container ${container} does not run`);
  return pid;
}

/** The kubelet stand-in's process on `node` (its command line names the node and the lab's folder). */
export function agentPid(plan: LabPlan, node: string): number {
  const dir = join(labDir(plan), node, "state");
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const i = argv.indexOf("--node-name");
    if (i > 0 && argv[i + 1] === node && argv.includes(dir)) return Number(entry);
  }
  throw new Error(`lab ${plan.name}: no agent runs for ${node}`);
}
