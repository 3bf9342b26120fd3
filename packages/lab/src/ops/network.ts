// The lab's network: the router's namespace holding the node network's bridge, the client behind
// the router, and the control plane's namespace on the node network. Nodes plug in later (node.ts).
import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import type { LabPlan } from "../labPlan.ts";
import { deleteNamespacesNow } from "../netns/netnsLab.ts";
import { freshNamespace, labDir, labNamespace, namespaceExists, plugIntoNodeNetwork } from "./fabric.ts";

export interface NetworkSpec {
  plan: LabPlan;
}

export interface NetworkState {
  /** New on every creation: the pieces plugged into this network are remade with it. */
  instance: string;
}

const namespaces = (plan: LabPlan) => [plan.controlPlane.netns, plan.client.netns, plan.router.netns];

export async function create({ plan }: NetworkSpec): Promise<NetworkState> {
  try {
    const router = await freshNamespace(plan, plan.router.netns, true);
    // Hash on ports too (L4), so one client's flows spread over the LB nodes (ECMP paper, 4.2).
    await router.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
    await router.ip("link", "add", plan.router.bridge, "type", "bridge");
    // The bridge is the node network's switch, and a switch runs no netfilter. A namespace starts
    // with br_netfilter's bridge-nf-call-* on (what a Kubernetes node's pod bridge needs), which
    // gives every bridged IPv4 frame netfilter's hooks and a route lookup on the way: a cost the
    // wire between real machines does not put on their CPUs, and one the LB path's extra hop
    // pays twice in the lab's benchmarks. (Absent without br_netfilter: nothing to turn off.)
    if (existsSync("/proc/sys/net/bridge"))
      for (const table of ["iptables", "ip6tables", "arptables"])
        await router.sysctl(`net.bridge.bridge-nf-call-${table}`, "0");
    await router.configure(plan.router.bridge, `${plan.router.ip}/${plan.prefixLength}`);

    const client = await freshNamespace(plan, plan.client.netns, false);
    const clientBits = plan.client.cidr.split("/")[1];
    await labNamespace(plan, plan.router.netns).ip(
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
    await router.configure(plan.router.clientIface, `${plan.router.clientIp}/${clientBits}`);
    await client.configure("eth0", `${plan.client.ip}/${clientBits}`);
    await client.defaultRoute(plan.router.clientIp);

    const cp = await freshNamespace(plan, plan.controlPlane.netns, false);
    await plugIntoNodeNetwork(plan, cp, plan.controlPlane.fabricIface, plan.controlPlane.ip);
    return { instance: randomUUID() };
  } catch (err) {
    remove({ plan });
    throw err;
  }
}

export function healthy({ plan }: NetworkSpec): boolean {
  return namespaces(plan).every(namespaceExists);
}

export function remove({ plan }: NetworkSpec): void {
  deleteNamespacesNow(namespaces(plan), `lab ${plan.name}`);
  rmSync(labDir(plan), { recursive: true, force: true });
}
