export {
  LoadBalancerService,
  REQUESTED_VIPS_ANNOTATION,
  VIP_POOL_ANNOTATION,
  type LoadBalancerServiceArgs,
} from "./loadBalancerService.ts";
