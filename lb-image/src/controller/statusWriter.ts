// Records a VIP allocation in the Service's status (the only thing the controller writes there).
import type { CoreV1Api, V1Service } from "@kubernetes/client-node";

export function statusWriter(api: CoreV1Api): (svc: V1Service, vips: string[]) => Promise<void> {
  return async (svc, vips) => {
    const body: V1Service = {
      ...svc,
      // ipMode VIP: traffic arrives with the VIP as destination (as with a cloud LB).
      status: { ...svc.status, loadBalancer: { ingress: vips.map((ip) => ({ ip, ipMode: "VIP" })) } },
    };
    // resourceVersion makes this a compare-and-swap: a stale cache gets a 409 and the next run retries.
    await api.replaceNamespacedServiceStatus({
      name: svc.metadata!.name!,
      namespace: svc.metadata!.namespace!,
      body,
    });
  };
}
