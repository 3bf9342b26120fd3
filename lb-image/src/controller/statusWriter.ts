// Records a VIP allocation in the Service's status (the only thing the controller writes there).
import type { CoreV1Api, V1LoadBalancerIngress, V1Service } from "@kubernetes/client-node";

const IP_MODE = "Proxy";

/**
 * The status ingress the controller writes for `vips`. ipMode Proxy: kube-proxy must leave the VIP
 * to us. With "VIP" it DNATs VIP traffic straight to the endpoints on every node (the LB nodes
 * included), and our LB pods never see it.
 */
export function ingressOf(vips: readonly string[]): V1LoadBalancerIngress[] {
  return vips.map((ip) => ({ ip, ipMode: IP_MODE }));
}

/** Whether the Service's status ingress is exactly what the controller writes for its VIPs. */
export function ingressAsWritten(svc: V1Service, vips: readonly string[]): boolean {
  const have = svc.status?.loadBalancer?.ingress ?? [];
  // Field by field: the client's objects need not list their keys in our order.
  return (
    have.length === vips.length &&
    have.every((i, n) => i.ip === vips[n] && i.ipMode === IP_MODE && !i.hostname && !i.ports?.length)
  );
}

export function statusWriter(api: CoreV1Api): (svc: V1Service, vips: string[]) => Promise<void> {
  return async (svc, vips) => {
    const body: V1Service = {
      ...svc,
      status: { ...svc.status, loadBalancer: { ingress: ingressOf(vips) } },
    };
    // resourceVersion makes this a compare-and-swap: a stale cache gets a 409 and the next run retries.
    await api.replaceNamespacedServiceStatus({
      name: svc.metadata!.name!,
      namespace: svc.metadata!.namespace!,
      body,
    });
  };
}
