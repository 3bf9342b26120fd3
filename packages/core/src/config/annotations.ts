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
 * BGP): TCP packets of connections these LB pods did not see start go there, in the DSR tunnel.
 */
export const HANDOVER_FROM_ANNOTATION = "portable-lb.io/handover-from";
/**
 * Comma-separated LB node addresses of the platform taking this VIP over: this platform's LB nodes
 * accept the connections those hand back (tunnel packets from them to this Service's VIP ports).
 */
export const HANDOVER_ACCEPT_FROM_ANNOTATION = "portable-lb.io/handover-accept-from";
