// The lab's site: the upstream router's and the client's namespaces, shared by every platform that
// sits behind them (two clusters in one data centre, or two sites behind one WAN router). No
// platform owns it: each one joins (its record in the site's folder) and leaves, the first to join
// makes the namespaces, the last to leave removes them. Platforms of one site are separate Pulumi
// stacks, so every change to the site is made under a lock in its folder.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { cidrsOverlap } from "@portable-lb/core";
import { instancesRoot } from "../controlPlane/controlPlane.ts";
import type { LabPlan } from "../labPlan.ts";
import { deleteNamespacesNow, NetnsError } from "../netns/netnsLab.ts";
import { runs, waitUntil } from "../processes.ts";
import { freshNamespace, labNamespace, namespaceExists } from "./fabric.ts";

/** What the site keeps of each platform behind it. */
export interface SiteMember {
  name: string;
  nodeCidr: string;
  clientCidr: string;
}

export function siteDir(plan: Pick<LabPlan, "site">): string {
  return join(dirname(instancesRoot()), "sites", plan.site);
}

const membersDir = (plan: Pick<LabPlan, "site">) => join(siteDir(plan), "members");

export function siteMembers(plan: Pick<LabPlan, "site">): SiteMember[] {
  const dir = membersDir(plan);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .flatMap((f) => {
      try {
        return [JSON.parse(readFileSync(join(dir, f), "utf8")) as SiteMember];
      } catch {
        return [];
      }
    });
}

const LOCK_WAIT_MS = 300_000;

/**
 * Runs `fn` holding the site's lock (a folder made atomically, with its holder's pid; a holder that
 * died leaves a lock the next one takes over).
 */
export async function withSiteLock<T>(plan: Pick<LabPlan, "site">, fn: () => Promise<T>): Promise<T> {
  const lock = join(siteDir(plan), "lock");
  mkdirSync(siteDir(plan), { recursive: true });
  const take = () => {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      return true;
    } catch {
      const holder = Number(readFileSafe(join(lock, "pid")));
      if (holder > 0 && holder !== process.pid && !runs(holder, ""))
        rmSync(lock, { recursive: true, force: true });
      return false;
    }
  };
  if (!(await waitUntil(take, LOCK_WAIT_MS, 200)))
    throw new NetnsError(
      `lab site ${plan.site}: another lab change held ${lock} for ${LOCK_WAIT_MS / 1000} s; wait for it, or remove the folder if no lab command runs`,
    );
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
    // The last platform gone, nothing of the site is left.
    if (readdirSync(siteDir(plan)).length === 0) rmSync(siteDir(plan), { recursive: true, force: true });
  }
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

/** Why `plan` cannot sit behind the site's other platforms, if it cannot. */
export function siteConflict(plan: LabPlan, others: SiteMember[]): string | undefined {
  for (const o of others.filter((m) => m.name !== plan.name)) {
    if (o.clientCidr !== plan.client.cidr)
      return `environment.clientCidr: the site ${plan.site} has the client network ${o.clientCidr} (platform ${o.name}) (got "${plan.client.cidr}"); give every platform of a site the same clientCidr`;
    if (cidrsOverlap(o.nodeCidr, plan.nodeCidr))
      return `network.nodeCidr: overlaps platform ${o.name}'s node network ${o.nodeCidr} behind the same router (got "${plan.nodeCidr}"); give each platform of a site its own, e.g. 192.168.101.0/24`;
  }
  return undefined;
}

const siteNamespaces = (plan: LabPlan) => [plan.client.netns, plan.router.netns];

/** Whether the site's namespaces exist and `plan` is recorded as one of its platforms. */
export function inSite(plan: LabPlan): boolean {
  return siteNamespaces(plan).every(namespaceExists) && siteMembers(plan).some((m) => m.name === plan.name);
}

/**
 * Records `plan` as a platform of its site and makes whatever of the site is missing (all of it for
 * the first platform, or after a reboot): the router's namespace and the client behind it. Call
 * with the site's lock held.
 */
export async function joinSite(plan: LabPlan): Promise<void> {
  const conflict = siteConflict(plan, siteMembers(plan));
  if (conflict) throw new NetnsError(conflict);
  mkdirSync(membersDir(plan), { recursive: true });
  const member: SiteMember = { name: plan.name, nodeCidr: plan.nodeCidr, clientCidr: plan.client.cidr };
  writeFileSync(join(membersDir(plan), `${plan.name}.json`), JSON.stringify(member, null, 2));
  if (!namespaceExists(plan.router.netns)) {
    // Without its router the client is cut off: both are made again.
    deleteNamespacesNow([plan.client.netns], `lab site ${plan.site}`);
    await makeRouter(plan);
  }
  if (!namespaceExists(plan.client.netns)) await makeClient(plan);
}

async function makeRouter(plan: LabPlan): Promise<void> {
  const router = await freshNamespace(plan, plan.router.netns, true);
  // Hash on ports too (L4), so one client's flows spread over the LB nodes (ECMP paper, 4.2).
  await router.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
  // Its bridges are the node networks' switches, and a switch runs no netfilter. A namespace starts
  // with br_netfilter's bridge-nf-call-* on (what a Kubernetes node's pod bridge needs), which
  // gives every bridged IPv4 frame netfilter's hooks and a route lookup on the way: a cost the
  // wire between real machines does not put on their CPUs, and one the LB path's extra hop
  // pays twice in the lab's benchmarks. (Absent without br_netfilter: nothing to turn off.)
  if (existsSync("/proc/sys/net/bridge"))
    for (const table of ["iptables", "ip6tables", "arptables"])
      await router.sysctl(`net.bridge.bridge-nf-call-${table}`, "0");
}

async function makeClient(plan: LabPlan): Promise<void> {
  const client = await freshNamespace(plan, plan.client.netns, false);
  const router = labNamespace(plan, plan.router.netns);
  const bits = plan.client.cidr.split("/")[1];
  // A client left without its namespace leaves its router end dangling: made afresh.
  await router.exec("ip", ["link", "delete", plan.router.clientIface]);
  await router.ip(
    ...[
      "link",
      "add",
      plan.router.clientIface,
      "type",
      "veth",
      "peer",
      "name",
      "eth0",
      "netns",
      client.netns,
    ],
  );
  await router.configure(plan.router.clientIface, `${plan.router.clientIp}/${bits}`);
  await client.configure("eth0", `${plan.client.ip}/${bits}`);
  await client.defaultRoute(plan.router.clientIp);
}

/** Takes `plan` off its site; the last platform to leave removes the site's namespaces and folder. */
export function leaveSite(plan: LabPlan): void {
  rmSync(join(membersDir(plan), `${plan.name}.json`), { force: true });
  if (siteMembers(plan).length > 0) return;
  deleteNamespacesNow(siteNamespaces(plan), `lab site ${plan.site}`);
  // The lock itself is removed by withSiteLock.
  for (const entry of existsSync(siteDir(plan)) ? readdirSync(siteDir(plan)) : [])
    if (entry !== "lock") rmSync(join(siteDir(plan), entry), { recursive: true, force: true });
}
