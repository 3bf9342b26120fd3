// What every piece of a lab stack shares: its folder, handles on its namespaces, and the plumbing
// that puts a namespace on the node network (a veth from the router's bridge).
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { instancesRoot } from "../controlPlane/controlPlane.ts";
import type { LabPlan } from "../labPlan.ts";
import {
  deleteNamespacesNow,
  execCommand,
  LabNamespace,
  NetnsError,
  type ProcessRecord,
} from "../netns/netnsLab.ts";

/** Logs, credentials and node folders of a lab stack; removed with its network, the last piece. */
export function labDir(plan: LabPlan): string {
  return join(dirname(instancesRoot()), "labs", plan.name);
}

/** The control plane's instance folder (the same place `npm run control-plane` uses). */
export function controlPlaneDir(plan: LabPlan): string {
  return join(instancesRoot(), plan.name);
}

/** A handle on one of the lab's namespaces; processes it starts are appended to `records`. */
export function labNamespace(plan: LabPlan, netns: string, records: ProcessRecord[] = []): LabNamespace {
  mkdirSync(labDir(plan), { recursive: true });
  return new LabNamespace(netns, netns, labDir(plan), (r) => records.push(r));
}

export function namespaceExists(netns: string): boolean {
  return existsSync(`/run/netns/${netns}`);
}

/** Whether `netns` exists and has the link `dev` (false without the namespace). */
export async function hasLink(plan: LabPlan, netns: string, dev: string): Promise<boolean> {
  if (!namespaceExists(netns)) return false;
  return (await labNamespace(plan, netns).exec("ip", ["link", "show", "dev", dev])).code === 0;
}

/** Creates `netns` afresh (what a failed earlier attempt left is removed first), loopback up. */
export async function freshNamespace(
  plan: LabPlan,
  netns: string,
  forwarding: boolean,
): Promise<LabNamespace> {
  deleteNamespacesNow([netns], `lab ${plan.name}`);
  const made = await execCommand("ip", ["netns", "add", netns]);
  if (made.code !== 0)
    throw new NetnsError(`lab ${plan.name}: 'ip netns add ${netns}' failed: ${made.stderr.trim()}`);
  const ns = labNamespace(plan, netns);
  await ns.ip("link", "set", "lo", "up");
  if (forwarding) await ns.sysctl("net.ipv4.ip_forward", "1");
  return ns;
}

/** Puts `ns` on the node network as `ip` (its `eth0`), with the router as default gateway. */
export async function plugIntoNodeNetwork(plan: LabPlan, ns: LabNamespace, fabricIface: string, ip: string) {
  const router = labNamespace(plan, plan.router.netns);
  // Made inside the namespaces: the host's own interfaces are never involved.
  await router.ip("link", "add", fabricIface, "type", "veth", "peer", "name", "eth0", "netns", ns.netns);
  await router.ip("link", "set", fabricIface, "master", plan.router.bridge, "up");
  await ns.configure("eth0", `${ip}/${plan.prefixLength}`);
  await ns.defaultRoute(plan.router.ip);
}

/**
 * Puts `netns` on the node network as `ip`, making it (with `forwarding`) or only plugging it in
 * again as needed: after a reboot it is gone, and after its router end went with the router's
 * namespace it is there without its link (its processes kept).
 */
export async function ensurePlugged(
  plan: LabPlan,
  netns: string,
  where: { fabricIface: string; ip: string; forwarding: boolean },
): Promise<void> {
  if (!namespaceExists(netns)) {
    const ns = await freshNamespace(plan, netns, where.forwarding);
    await plugIntoNodeNetwork(plan, ns, where.fabricIface, where.ip);
  } else if (!(await hasLink(plan, netns, "eth0")))
    await plugIntoNodeNetwork(plan, labNamespace(plan, netns), where.fabricIface, where.ip);
}
