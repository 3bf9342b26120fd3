// @portable-lb/core: the components a platform team deploys, and the schema they share with the LB
// controller. The controller imports only "@portable-lb/core/config" (no Pulumi in the LB image).
export * from "./config/index.ts";
export * from "./app/index.ts";
export * from "./bgp/index.ts";
export * from "./cloudRoutes/index.ts";
export * from "./cluster/index.ts";
export * from "./flannel/index.ts";
export * from "./loadBalancer/index.ts";
export * from "./routeReflector/index.ts";
export { CONFIG_HASH_ANNOTATION, configHash } from "./configHash.ts";
export { minimalSecurityContext, restrictedPodSecurityContext } from "./containerSecurity.ts";
export type { ClusterEnvironment, EnvironmentRouteTargets, RouteTargetFacts } from "./environment.ts";
export { PART_OF, standardLabels } from "./labels.ts";
export { PLATFORMS, hasCloudGateway, type Platform } from "./platform.ts";
export { SystemNamespace, type PodSecurityLevel, type SystemNamespaceArgs } from "./systemNamespace.ts";
export { ConfigError, collect, collectParsed, parseOrThrow, problem, schemaProblems } from "./validation.ts";
export { nearestName } from "./nearestName.ts";
