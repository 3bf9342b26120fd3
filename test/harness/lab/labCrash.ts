// What a laptop does to a lab: every process of it killed at once (a crash: the namespaces and
// mounts a process does not hold stay), or that and its network namespaces gone too (a reboot),
// for the tests that `npm run lab` brings it all back.
import { controlPlaneDir, execCommand, labDir, type LabPlan, waitUntil } from "@portable-lb/lab";
import { labProcesses } from "../../../bench/lib/labProcesses.ts";

/** The network namespaces of the platforms `plans` and of their sites. */
export function labNamespaces(plans: LabPlan[]): string[] {
  const all = plans.flatMap((p) => [
    p.controlPlane.netns,
    ...p.nodes.map((n) => n.netns),
    p.router.netns,
    p.client.netns,
  ]);
  return [...new Set(all)];
}

/**
 * Every process of the platforms and their sites: those in their namespaces and their nodes'
 * cgroups (the benchmarks' reading), and those naming their folders (the host's API forwarder).
 */
export async function labProcessIds(plans: LabPlan[]): Promise<number[]> {
  const pids = new Set<number>();
  for (const plan of plans) {
    for (const p of labProcesses(plan)()) pids.add(p.stat.pid);
    for (const dir of [labDir(plan), controlPlaneDir(plan)])
      for (const p of (await execCommand("pgrep", ["-f", "--", dir])).stdout.split(/\s+/).filter(Boolean))
        pids.add(Number(p));
  }
  pids.delete(process.pid);
  return [...pids].sort((a, b) => a - b);
}

/**
 * Kills every process of the platforms at once (SIGKILL, no clean-up), until none is left (bounded);
 * with `reboot`, then deletes their network namespaces as a reboot's fresh /run would. Returns
 * how many processes it killed.
 */
export async function crashLab(plans: LabPlan[], opts: { reboot: boolean }): Promise<number> {
  const killed = new Set<number>();
  const gone = await waitUntil(
    async () => {
      const left = await labProcessIds(plans);
      for (const pid of left) {
        try {
          process.kill(pid, "SIGKILL");
          killed.add(pid);
        } catch {
          // exited meanwhile
        }
      }
      return left.length === 0;
    },
    30_000,
    200,
  );
  if (!gone)
    throw new Error(`lab processes still running after 30 s: ${(await labProcessIds(plans)).join(" ")}`);
  if (opts.reboot) for (const ns of labNamespaces(plans)) await execCommand("ip", ["netns", "delete", ns]);
  return killed.size;
}
