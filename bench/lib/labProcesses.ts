// The lab's processes: those in its network namespaces (router, client, control plane, nodes:
// containerd, the kubelet, kube-proxy, host-network pods such as the node agent), and those under
// its nodes' cgroup roots (every pod's containers, in their pods' own network namespaces).
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { labNodeLayout, parseProcStat, type LabPlan } from "@portable-lb/lab";
import type { ProcessSample } from "./idleCpu.ts";

/** What reads the lab's processes as /proc shows them at each call. */
export function labProcesses(plan: LabPlan): () => ProcessSample[] {
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
