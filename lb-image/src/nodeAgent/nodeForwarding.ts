// What the node itself needs besides our routes, checked but never changed:
// - IPv4 forwarding: VIP traffic arrives on the node's uplink and leaves towards the LB pod. Every
//   Kubernetes node already forwards (pod traffic needs it; kubeadm refuses a node without it), and
//   an unprivileged container cannot write /proc/sys anyway, so we only report it (log, metric,
//   /readyz) instead of asking for privileges to set it.
// - rp_filter: left as the node has it, strict included. The replies (source = VIP) arrive from the
//   LB pod over the pod bridge, and our pool route sends VIP traffic out of that same interface (for
//   a multipath route the kernel accepts any nexthop's device), so the strict check passes; client
//   traffic from the uplink passes by the node's default route. Loosening it would only weaken the
//   node's anti-spoofing. When no LB pod is left there is no route, but no replies either.
import { z } from "zod";
import { run } from "../dataplane/exec.ts";

const netconfSchema = z.array(z.object({ interface: z.string(), forwarding: z.boolean().optional() }));

/** `ip -4 -j netconf show` → whether the node forwards IPv4 (the "all" switch). */
export function parseForwarding(json: string): boolean {
  return netconfSchema.parse(JSON.parse(json)).find((c) => c.interface === "all")?.forwarding === true;
}

export async function nodeForwards(ip: [string, ...string[]]): Promise<boolean> {
  return parseForwarding(await run([...ip, "-4", "-j", "netconf", "show"]));
}
