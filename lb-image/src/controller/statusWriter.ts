// Records a VIP allocation in the Service's status (the only thing the controller writes there).
import type { CoreV1Api, V1Service } from "@kubernetes/client-node";

export function statusWriter(api: CoreV1Api): (svc: V1Service, vips: string[]) => Promise<void> {
  return async (svc, vips) => {
    const body: V1Service = {
      ...svc,
      // ipMode Proxy: kube-proxy must leave the VIP to us. With "VIP" it DNATs VIP traffic straight
      // to the endpoints on every node (the LB nodes included), and our LB pods never see it.
      status: { ...svc.status, loadBalancer: { ingress: vips.map((ip) => ({ ip, ipMode: "Proxy" })) } },
    };
    // resourceVersion makes this a compare-and-swap: a stale cache gets a 409 and the next run retries.
    await api.replaceNamespacedServiceStatus({
      name: svc.metadata!.name!,
      namespace: svc.metadata!.namespace!,
      body,
    });
  };
}
