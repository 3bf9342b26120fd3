// What the running lab costs at rest: the CPU its processes take over a window, per group of
// processes (by command line: LB controllers, node agents, speakers and BIRD, kubelets,
// containerd, kube-proxy, the control plane...), read from /proc at its start and end (nothing is
// traced or run in the lab meanwhile).
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:idle-cpu -- [--seconds 60]
//
// The lab's processes: those in its network namespaces (router, client, control plane, nodes:
// containerd, the kubelet, kube-proxy, host-network pods such as the node agent), and those under
// its nodes' cgroup roots (every pod's containers, in their pods' own network namespaces).
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { labNodeLayout, parseProcStat, type LabPlan } from "@portable-lb/lab";
import { progress } from "./lib/benchSetup.ts";
import { cpuByGroup, formatGroups, type ProcessSample } from "./lib/idleCpu.ts";
import { labRig } from "./lib/labRig.ts";

/** The lab's processes, as /proc shows them now. */
function labProcesses(plan: LabPlan): () => ProcessSample[] {
  const namespaces = [
    plan.router.netns,
    plan.client.netns,
    plan.controlPlane.netns,
    ...plan.nodes.map((n) => n.netns),
  ];
  const inodes = new Set(
    namespaces.map((name) => {
      try {
        return `net:[${statSync(`/run/netns/${name}`).ino}]`;
      } catch {
        throw new Error(`the lab's network namespace ${name} is missing: is the lab running (npm run lab)?`);
      }
    }),
  );
  // A /proc/<pid>/cgroup line is `id:controllers:/path`; each node's root is `/portable-lb-…`.
  const cgroupRoots = plan.nodes.map((n) => labNodeLayout(plan, n.name).cgroupRoot);
  const ours = (pid: string) =>
    inodes.has(readlinkSync(`/proc/${pid}/ns/net`)) ||
    readFileSync(`/proc/${pid}/cgroup`, "utf8")
      .split("\n")
      .some((l) => cgroupRoots.some((root) => l.includes(`:${root}/`) || l.endsWith(`:${root}`)));
  return () =>
    readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .flatMap((pid) => {
        try {
          if (!ours(pid)) return [];
          const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
          const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
          return [{ stat, argv }];
        } catch {
          return []; // gone meanwhile
        }
      });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { seconds: { type: "string", default: "60" } } });
  const seconds = Number(values.seconds);
  if (!(seconds > 0)) throw new Error(`--seconds: a number of seconds above 0 (got ${values.seconds})`);
  const rig = await labRig();
  const snapshot = labProcesses(rig.plan);
  const before = snapshot();
  progress(`lab ${rig.plan.name}: ${before.length} processes; reading their CPU time again in ${seconds} s`);
  await sleep(seconds * 1_000);
  console.log(formatGroups(cpuByGroup(before, snapshot(), seconds), seconds));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
