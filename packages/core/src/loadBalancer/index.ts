export {
  DEFAULT_LB_NAMESPACE,
  LB_PRIORITY_CLASS,
  LoadBalancer,
  type LoadBalancerArgs,
} from "./loadBalancer.ts";
export {
  DEFAULT_LB_NODE_SELECTOR,
  LB_APP_LABEL,
  LB_POD_SYSCTLS,
  lbPodSpec,
  type LbPodSpecInput,
} from "./podSpec.ts";
export { LB_CLUSTER_RULES, LB_NAMESPACE_RULES, NODE_AGENT_RULES } from "./rbac.ts";
export { NODE_AGENT_NAME, NodeAgent, nodeAgentPodSpec, type NodeAgentArgs } from "./nodeAgent.ts";
export { PodMonitors, type PodMonitorsArgs, type ScrapeTarget } from "./monitoring.ts";
export type { MonitoringArgs } from "../config/monitoring.ts";
