export { LoadBalancerService, type LoadBalancerServiceArgs } from "./loadBalancerService.ts";
