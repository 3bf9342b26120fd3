// Local DSR backends the LB pods' flows cannot reach, and what the node agent tells the Services'
// owners about them, as Events on the Services whose VIPs they serve (a pure function): a backend
// on the host network is never prepared for DSR (dsrPlan.ts). (A node without ipip, for IPVS-engine
// LBs, is told through its Lease instead, and its backends' ports are served by SNAT.)
import type { V1Service } from "@kubernetes/client-node";
import {
  isOurs,
  refOf,
  statusVips,
  type ServedClasses,
  type SkippedItem,
} from "../../controller/desiredState.ts";
import type { DsrPlan } from "./dsrPlan.ts";

const REASON = "DirectServerReturnHostNetworkBackend";
const message = (ip: string, node: string) =>
  `backend ${ip} on node ${node} is on the host network (its address is the node's), where direct server return cannot deliver (the VIP on the node's own lo would capture it for every pod): the flows the LB pods hand it get no answer. Run it in the pod network, or set dataPlane.mode snat`;

export function unreachableBackendEvents(
  backends: DsrPlan["hostNetwork"],
  services: V1Service[],
  served: ServedClasses,
  nodeName: string,
): SkippedItem[] {
  if (backends.length === 0) return [];
  const items: SkippedItem[] = [];
  for (const svc of services) {
    if (!isOurs(svc, served)) continue;
    const vips = new Set(statusVips(svc));
    for (const b of backends) {
      if (!b.vips.some((vip) => vips.has(vip))) continue;
      items.push({
        ...refOf(svc),
        kind: "Service",
        reason: REASON,
        message: message(b.ip, nodeName),
      });
    }
  }
  return items;
}
