// A lab platform's network: its node network (a bridge in the site's router, addressed as the
// platform's gateway) and the control plane's namespace on it. The router and the client are the
// site's (site.ts), shared with the platforms beside this one. Nodes plug in later (node.ts).
//
// Healed in place: after a crash or a reboot the next `up` makes again whatever is missing (the
// site's namespaces, the bridge, the control plane's namespace or its link) under the same
// instance, so the control plane and the nodes keep their data and are healed, not made afresh.
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import type { LabPlan } from "../labPlan.ts";
import { deleteNamespacesNow } from "../netns/netnsLab.ts";
import { ensurePlugged, hasLink, labDir, labNamespace, namespaceExists } from "./fabric.ts";
import { inSite, joinSite, leaveSite, withSiteLock } from "./site.ts";

export interface NetworkSpec {
  plan: LabPlan;
}

export interface NetworkState {
  /** New on every creation: the pieces plugged into this network are remade with it. */
  instance: string;
}

/** Makes whatever of the platform's network is missing; idempotent. */
async function ensure(plan: LabPlan): Promise<void> {
  await withSiteLock(plan, async () => {
    await joinSite(plan);
    const router = labNamespace(plan, plan.router.netns);
    if (!(await hasLink(plan, plan.router.netns, plan.router.bridge))) {
      await router.ip("link", "add", plan.router.bridge, "type", "bridge");
      await router.configure(plan.router.bridge, `${plan.router.ip}/${plan.prefixLength}`);
    }
  });
  const cp = plan.controlPlane;
  await ensurePlugged(plan, cp.netns, { fabricIface: cp.fabricIface, ip: cp.ip, forwarding: false });
}

export async function create({ plan }: NetworkSpec): Promise<NetworkState> {
  try {
    await ensure(plan);
    return { instance: randomUUID() };
  } catch (err) {
    await remove({ plan });
    throw err;
  }
}

export async function healthy({ plan }: NetworkSpec): Promise<boolean> {
  return (
    inSite(plan) &&
    (await hasLink(plan, plan.router.netns, plan.router.bridge)) &&
    (await hasLink(plan, plan.controlPlane.netns, "eth0"))
  );
}

/** The same plan heals in place; another one (new addresses) makes the network afresh. */
export function updatable(olds: NetworkSpec, news: NetworkSpec): boolean {
  return isDeepStrictEqual(olds, news);
}

export async function update(_olds: NetworkSpec, { plan }: NetworkSpec, state: NetworkState) {
  await ensure(plan);
  return state;
}

export async function remove({ plan }: NetworkSpec): Promise<void> {
  deleteNamespacesNow([plan.controlPlane.netns], `lab ${plan.name}`);
  await withSiteLock(plan, async () => {
    if (namespaceExists(plan.router.netns))
      await labNamespace(plan, plan.router.netns).exec("ip", ["link", "delete", plan.router.bridge]);
    leaveSite(plan);
  });
  rmSync(labDir(plan), { recursive: true, force: true });
}
