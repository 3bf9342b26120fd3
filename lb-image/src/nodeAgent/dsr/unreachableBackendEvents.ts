// Local DSR backends the LB pods' flows cannot reach, and what the node agent tells the Services'
// owners about them, as Events on the Services whose VIPs they serve (a pure function):
//   - hostNetwork: a backend on the host network is never prepared for DSR (dsrPlan.ts);
//   - noIpip: with IPVS-engine LBs (their tunnel mode sends IPIP), a backend on a node whose kernel
//     has no ipip decapsulates VXLAN only.
import type { V1Service } from "@kubernetes/client-node";
import { isOurs, refOf, statusVips, type SkippedItem } from "../../controller/desiredState.ts";
import type { DsrPlan } from "./dsrPlan.ts";

const WHY = {
  hostNetwork: {
    reason: "DirectServerReturnHostNetworkBackend",
    message: (ip: string, node: string) =>
      `backend ${ip} on node ${node} is on the host network (its address is the node's), where direct server return cannot deliver (the VIP on the node's own lo would capture it for every pod): the flows the LB pods hand it get no answer. Run it in the pod network, or set dataPlane.mode snat`,
  },
  noIpip: {
    reason: "DirectServerReturnNoIpip",
    message: (ip: string, node: string) =>
      `backend ${ip} on node ${node} cannot decapsulate IPIP: the node's kernel has no ipip module, and the LB pods (dataPlane.engine ipvs) tunnel in IPIP, so the flows they hand it get no answer. Load ipip on the node (modprobe ipip), or set dataPlane.engine nftables (VXLAN)`,
  },
} as const;

export function unreachableBackendEvents(
  why: keyof typeof WHY,
  backends: DsrPlan["hostNetwork"],
  services: V1Service[],
  loadBalancerClass: string,
  nodeName: string,
): SkippedItem[] {
  if (backends.length === 0) return [];
  const items: SkippedItem[] = [];
  for (const svc of services) {
    if (!isOurs(svc, loadBalancerClass)) continue;
    const vips = new Set(statusVips(svc));
    for (const b of backends) {
      if (!b.vips.some((vip) => vips.has(vip))) continue;
      items.push({
        ...refOf(svc),
        kind: "Service",
        reason: WHY[why].reason,
        message: WHY[why].message(b.ip, nodeName),
      });
    }
  }
  return items;
}
