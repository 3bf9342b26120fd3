export {
  ROUTING_CHOICES,
  checkClusterInput,
  clusterInputProblems,
  flannelInputSchema,
  loadBalancerInputSchema,
  type CheckedClusterInput,
  type ClusterInput,
  type EnvironmentFacts,
  type FlannelInput,
  type LoadBalancerInput,
} from "./clusterInput.ts";
export { networkPlanSchema, type NetworkPlan, type NetworkPlanInput } from "./networkPlan.ts";
export { PortableCluster, type PortableClusterArgs } from "./portableCluster.ts";
export { resolveRoutingMode, type RoutingChoice, type RoutingMode } from "./routingMode.ts";
