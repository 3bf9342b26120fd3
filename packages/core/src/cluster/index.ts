export { networkPlanSchema, type NetworkPlan, type NetworkPlanInput } from "./networkPlan.ts";
export { PortableCluster, type PortableClusterArgs } from "./portableCluster.ts";
export { resolveRoutingMode, type RoutingChoice, type RoutingMode } from "./routingMode.ts";
