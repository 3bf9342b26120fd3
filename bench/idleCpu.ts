// What the running lab costs at rest: the CPU its processes take over a window, per group of
// processes (by command line: LB controllers, node agents, speakers and BIRD, kubelets,
// containerd, kube-proxy, the control plane...), read from /proc at its start and end (nothing is
// traced or run in the lab meanwhile; which processes are the lab's: lib/labProcesses.ts).
//
//   npm run lab && npm run --silent lab -- outputs | npm run bench:idle-cpu -- [--seconds 60]
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { progress } from "./lib/benchSetup.ts";
import { cpuByGroup, formatGroups } from "./lib/idleCpu.ts";
import { labProcesses } from "./lib/labProcesses.ts";
import { labRig } from "./lib/labRig.ts";

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
