// Records a VIP allocation in the Service's status, and the cleanup finalizer in its metadata: the
// only things the controller writes on a Service.
import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type V1LoadBalancerIngress,
  type V1Service,
} from "@kubernetes/client-node";
import { FINALIZER_OWNER_ANNOTATION } from "@portable-lb/core/config";
import { CLEANUP_FINALIZER } from "./cleanupFinalizer.ts";

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

/**
 * Adds or removes the cleanup finalizer, with the owner annotation naming `owner` (this
 * controller's class), by a strategic merge patch: finalizers merge as a set, so another
 * controller's finalizers stay, and no resourceVersion is needed.
 */
export function finalizerWriter(
  api: CoreV1Api,
  owner: string,
): (svc: V1Service, present: boolean) => Promise<void> {
  return async (svc, present) => {
    const metadata = present
      ? { finalizers: [CLEANUP_FINALIZER], annotations: { [FINALIZER_OWNER_ANNOTATION]: owner } }
      : {
          "$deleteFromPrimitiveList/finalizers": [CLEANUP_FINALIZER],
          // null deletes the key in a merge patch.
          annotations: { [FINALIZER_OWNER_ANNOTATION]: null },
        };
    await api.patchNamespacedService(
      { name: svc.metadata!.name!, namespace: svc.metadata!.namespace!, body: { metadata } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
  };
}
