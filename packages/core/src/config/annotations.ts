// Service annotations the controller reads (set by LoadBalancerService or by hand).

/** Requested VIPs, comma-separated (spec.loadBalancerIP is deprecated upstream; MetalLB does the same). */
export const REQUESTED_VIPS_ANNOTATION = "portable-lb.io/load-balancer-ips";
/** Pick the VIP from this pool. */
export const VIP_POOL_ANNOTATION = "portable-lb.io/vip-pool";
