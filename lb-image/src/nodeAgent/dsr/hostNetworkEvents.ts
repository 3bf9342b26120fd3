// A DSR Service's backend on the host network is never prepared for DSR (dsrPlan.ts): the flows the
// LB pods hand it get no answer. What the node agent tells the Service's owner about it, as Events
// on the Services whose VIPs such a backend serves, as a pure function.
import type { V1Service } from "@kubernetes/client-node";
import { isOurs, refOf, statusVips, type SkippedItem } from "../../controller/desiredState.ts";
import type { DsrPlan } from "./dsrPlan.ts";

export function hostNetworkEvents(
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
        reason: "DirectServerReturnHostNetworkBackend",
        message: `backend ${b.ip} on node ${nodeName} is on the host network (its address is the node's), where direct server return cannot deliver (the VIP on the node's own lo would capture it for every pod): the flows the LB pods hand it get no answer. Run it in the pod network, or set dataPlane.mode snat`,
      });
    }
  }
  return items;
}
