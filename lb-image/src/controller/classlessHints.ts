// A LoadBalancer Service without spec.loadBalancerClass belongs to the cluster's default load
// balancer, if it has one (a cloud's, MetalLB...), never to portable-lb unless serveClassless makes
// it that default: otherwise we do not serve it or write its status. While it waits for an address, the elected allocator leaves a Normal Event on
// it that names portable-lb's class, and says the class cannot be added to an existing Service.
// It claims nothing (no status, no Warning), so it is harmless where another load balancer serves
// such Services, and it stops once one has given the Service an address.
import type { V1Service } from "@kubernetes/client-node";
import { refOf, type SkippedItem } from "./desiredState.ts";

export function classlessHints(services: V1Service[], loadBalancerClass: string): SkippedItem[] {
  return services
    .filter(
      (svc) =>
        svc.spec?.type === "LoadBalancer" &&
        !svc.spec.loadBalancerClass &&
        !svc.status?.loadBalancer?.ingress?.length,
    )
    .map((svc) => ({
      ...refOf(svc),
      kind: "Service" as const,
      reason: "NoLoadBalancerClass",
      message: `portable-lb serves only Services with spec.loadBalancerClass: ${loadBalancerClass}; this one has no class, so it is left to the cluster's default load balancer, if there is one. To have portable-lb serve it, delete it and create it again with that class (the class cannot be set or changed on an existing Service), or, where no other load balancer runs, set loadBalancer.serveClassless: true to make portable-lb the cluster's default.`,
    }));
}
