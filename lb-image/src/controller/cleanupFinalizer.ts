// The load-balancer cleanup finalizer, as Kubernetes' cloud service controllers keep it: the
// allocator puts it on every Service it serves, so deleting one (or changing its type) waits until
// its VIP is released, and a new Service cannot get the address while the old one is still
// served. Pure: which Services to claim and which to release; the reconciler writes.
import type { V1Service } from "@kubernetes/client-node";
import { FINALIZER_OWNER_ANNOTATION } from "@portable-lb/core/config";
import { isOurs, refOf, statusVips, type ServedClasses, type SkippedItem } from "./desiredState.ts";

/** The finalizer's name, shared with the cloud providers' controllers and the upstream e2e specs. */
export const CLEANUP_FINALIZER = "service.kubernetes.io/load-balancer-cleanup";

/** A Service this controller serves: of its class (or classless as the default), not being deleted. */
export function isServed(svc: V1Service, served: ServedClasses): boolean {
  return isOurs(svc, served) && !svc.metadata?.deletionTimestamp;
}

const hasCleanupFinalizer = (svc: V1Service): boolean =>
  svc.metadata?.finalizers?.includes(CLEANUP_FINALIZER) === true;

/**
 * Whether this controller put the finalizer there: its class in the owner annotation. Another
 * controller's (another class of ours, a cloud's) is never touched; a type change clears the
 * Service's class, so the annotation is what tells.
 */
const finalizedBy = (svc: V1Service, served: ServedClasses): boolean =>
  hasCleanupFinalizer(svc) &&
  svc.metadata?.annotations?.[FINALIZER_OWNER_ANNOTATION] === served.loadBalancerClass;

export interface FinalizerWork {
  /** Served, without our finalizer yet: it is added (with the owner annotation) once its address is written. */
  claim: V1Service[];
  /**
   * With our finalizer but no longer served (deleted, another type, or classless once serveClassless
   * is off): once the data plane has let its VIP go, the status is cleared where the API server has
   * not (a type change clears it) and the object stays, and the finalizer removed.
   */
  release: V1Service[];
}

export function finalizerWork(services: readonly V1Service[], served: ServedClasses): FinalizerWork {
  const claim: V1Service[] = [];
  const release: V1Service[] = [];
  for (const svc of services) {
    const ours = finalizedBy(svc, served);
    if (isServed(svc, served)) {
      if (!ours) claim.push(svc);
    } else if (ours) release.push(svc);
  }
  return { claim, release };
}

/** The Normal Event told once a Service's VIP is released. */
export function releasedNote(svc: V1Service): SkippedItem {
  const vips = statusVips(svc);
  const why = svc.metadata?.deletionTimestamp
    ? "the Service is being deleted"
    : `the Service is no longer one portable-lb serves (type ${svc.spec?.type ?? "unset"}, class ${svc.spec?.loadBalancerClass ?? "none"})`;
  return {
    ...refOf(svc),
    kind: "Service",
    reason: "VipReleased",
    // The API server clears the status of a Service whose type changed: its address is not known.
    message: `VIP${vips.length ? ` ${vips.join(", ")}` : ""} released (${why}); the LB pods stop serving and announcing it`,
  };
}
