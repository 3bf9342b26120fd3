// What direct server return needs on this node, as a pure function of the data plane's desired
// state: per local backend pod, the VIPs it must accept (those of its DSR services), and node-wide
// every DSR VIP (the node's table untracks forwarded traffic to and from all of them, an LB node's
// too). A backend on the host network (its address is the
// node's) is never prepared: the VIP would land on the node's own `lo`, and the node's decap device
// and rp_filter would change for everything on it; it is reported instead.
import { compareKeys, type VirtualService } from "../../dataplane/model.ts";

export interface DsrPlan {
  /** Per local backend pod IP, the VIPs it serves by DSR, sorted. */
  pods: Map<string, string[]>;
  /** Every VIP with a local DSR backend pod, sorted. */
  vips: string[];
  /** Every DSR VIP, with local backends or not, sorted. */
  dsrVips: string[];
  /** Local DSR backends whose address is the node's (host-network pods): not prepared. */
  hostNetwork: { ip: string; vips: string[] }[];
}

const sorted = (items: Iterable<string>) => [...new Set(items)].sort(compareKeys);

/**
 * Draining backends (weight 0) keep their VIPs: their established flows still arrive through the
 * LBs and must be answered from the VIP until the endpoint is gone.
 */
export function dsrPlan(services: VirtualService[], nodeName: string, nodeAddresses: string[]): DsrPlan {
  const byIp = new Map<string, Set<string>>();
  const dsrVips = new Set<string>();
  for (const s of services) {
    if (s.forwarding !== "dsr") continue;
    dsrVips.add(s.vip);
    for (const b of s.backends) {
      if (b.nodeName !== nodeName) continue;
      byIp.set(b.ip, (byIp.get(b.ip) ?? new Set()).add(s.vip));
    }
  }
  const own = new Set(nodeAddresses);
  const pods = new Map<string, string[]>();
  const hostNetwork: DsrPlan["hostNetwork"] = [];
  for (const ip of sorted(byIp.keys())) {
    const vips = sorted(byIp.get(ip)!);
    if (own.has(ip)) hostNetwork.push({ ip, vips });
    else pods.set(ip, vips);
  }
  return { pods, vips: sorted([...pods.values()].flat()), dsrVips: sorted(dsrVips), hostNetwork };
}
