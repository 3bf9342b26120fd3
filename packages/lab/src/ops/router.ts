// The lab's upstream router: FRR (zebra, bfdd, bgpd) in the router's namespace, configured with
// the frr.conf PortableCluster renders for users' routers (its `routerConfig` output).
import { rmSync } from "node:fs";
import type { LabPlan } from "../labPlan.ts";
import { FrrRouter } from "../netns/frrRouter.ts";
import { stopRecorded, type ProcessRecord } from "../netns/netnsLab.ts";
import { runs } from "../processes.ts";
import { labNamespace } from "./fabric.ts";

export interface RouterSpec {
  plan: LabPlan;
  /** frr.conf text (a secret when it holds the BGP password). */
  config: string;
  /** The network's instance: the router lives in its namespace. */
  network: string;
}

export interface RouterState {
  dir: string;
  daemons: ProcessRecord[];
}

export async function create({ plan, config }: RouterSpec): Promise<RouterState> {
  const daemons: ProcessRecord[] = [];
  try {
    const router = await FrrRouter.start(labNamespace(plan, plan.router.netns, daemons), config);
    return { dir: router.dir, daemons };
  } catch (err) {
    for (const d of daemons.reverse()) await stopRecorded(d, 5_000);
    throw err;
  }
}

export function healthy(_spec: RouterSpec, state: RouterState): boolean {
  return state.daemons.every((d) => runs(d.pid, d.marker));
}

export async function remove(_spec: RouterSpec, state: RouterState | undefined): Promise<void> {
  for (const d of [...(state?.daemons ?? [])].reverse()) await stopRecorded(d, 5_000);
  if (state) rmSync(state.dir, { recursive: true, force: true });
}
