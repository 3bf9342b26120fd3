// Service annotations the controller reads (set by LoadBalancerService or by hand).

/** Requested VIPs, comma-separated (spec.loadBalancerIP is deprecated upstream; MetalLB does the same). */
export const REQUESTED_VIPS_ANNOTATION = "portable-lb.io/load-balancer-ips";
/** Pick the VIP from this pool. */
export const VIP_POOL_ANNOTATION = "portable-lb.io/vip-pool";
/**
 * "false": the LB pods keep serving the Service's VIPs but stop announcing them (BGP) or routing
 * them (cloud routes), so traffic moves to whoever else announces them (a migration, maintenance).
 */
export const ANNOUNCE_ANNOTATION = "portable-lb.io/announce";
/**
 * Comma-separated LB node addresses of the platform that served this VIP before (a migration by
 * BGP): flows these LB pods did not see start are relayed there, in the DSR tunnel (nftables DSR).
 */
export const HANDOVER_FROM_ANNOTATION = "portable-lb.io/handover-from";
/**
 * Which flows go to the handover-from platform: "all" (every flow new to this LB pod, new
 * connections too: while both platforms announce the VIP), or "established" (the default: TCP
 * packets of connections this LB pod did not see start, once the old platform has withdrawn).
 */
export const HANDOVER_RELAY_ANNOTATION = "portable-lb.io/handover-relay";
/** The values of HANDOVER_RELAY_ANNOTATION. */
export const HANDOVER_RELAYS = ["all", "established"] as const;
/**
 * Comma-separated addresses of the platform taking this VIP over, its LB nodes' and LB pods' (its
 * nodes untrack the DSR tunnel, so relayed packets leave from the pods' own addresses): this
 * platform's LB nodes take the flows those relay here (steered by the node agent to the LB pod).
 */
export const HANDOVER_ACCEPT_FROM_ANNOTATION = "portable-lb.io/handover-accept-from";
/**
 * Written by the controller beside the cleanup finalizer (service.kubernetes.io/load-balancer-cleanup,
 * a name every cloud's controller shares): the loadBalancerClass of the controller that put it there,
 * so that only that one removes it, even once a type change has cleared the Service's class.
 */
export const FINALIZER_OWNER_ANNOTATION = "portable-lb.io/cleanup-finalizer-owner";
