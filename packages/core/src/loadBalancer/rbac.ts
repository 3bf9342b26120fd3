// Least-privilege RBAC for the LB controller: exactly what it needs, nothing else.
import type * as k8s from "@pulumi/kubernetes";

type PolicyRule = k8s.types.input.rbac.v1.PolicyRule;

/**
 * Cluster-wide: Services and EndpointSlices of every namespace, status writes, the cleanup
 * finalizer, and Events on Services.
 */
export const LB_CLUSTER_RULES: PolicyRule[] = [
  // patch: the cleanup finalizer (service.kubernetes.io/load-balancer-cleanup), by a strategic
  // merge patch of metadata.finalizers, as a cloud's service controller keeps it. RBAC cannot narrow
  // a verb to one field; the controller patches nothing else (lb-image/src/controller/statusWriter.ts).
  { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch", "patch"] },
  // The VIP allocation is recorded in status.loadBalancer.ingress.
  { apiGroups: [""], resources: ["services/status"], verbs: ["update", "patch"] },
  { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
];

/**
 * dataPlane.mode dsr adds, cluster-wide: reading NetworkPolicies, which may keep the DSR tunnel from
 * a Service's backends (the port is then served by SNAT, and an Event says why).
 */
export const LB_DSR_CLUSTER_RULES: PolicyRule[] = [
  { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["get", "list", "watch"] },
];

/** In its own namespace only: the Lease that elects the one VIP allocator. */
export const LB_NAMESPACE_RULES: PolicyRule[] = [
  { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
];

/** routingMode cloud-routes adds, cluster-wide: reading its Node (whose providerID names its instance). */
export const LB_CLOUD_ROUTES_CLUSTER_RULES: PolicyRule[] = [
  { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
];

/**
 * Added in its namespace by routingMode cloud-routes (the member and VIP Leases it coordinates by)
 * and by direct server return on the IPVS engine (each node's Lease on whether its kernel
 * decapsulates IPIP, written by its node agent): watching Leases.
 */
export const LB_LEASE_WATCH_RULES: PolicyRule[] = [
  { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["list", "watch"] },
];

/** The node agent, in the LB namespace only: it reads the LB pods (to route VIPs to its node's one). */
export const NODE_AGENT_RULES: PolicyRule[] = [
  { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
];

/**
 * With direct server return on the IPVS engine (IPIP tunnels), in the LB namespace: its node's Lease
 * on whether the kernel decapsulates IPIP, which it writes, and every node's, which it watches (it
 * decides which ports are DSR as the controllers do).
 */
export const NODE_AGENT_IPIP_RULES: PolicyRule[] = [
  {
    apiGroups: ["coordination.k8s.io"],
    resources: ["leases"],
    verbs: ["get", "list", "watch", "create", "update"],
  },
];

/**
 * With direct server return the node agent adds, cluster-wide: reading Services and EndpointSlices
 * (which VIPs the backend pods on its node serve) and NetworkPolicies (which ports fall back to
 * SNAT: the controller's own decision), and Events on Services (a host-network backend DSR cannot
 * serve).
 */
export const NODE_AGENT_DSR_CLUSTER_RULES: PolicyRule[] = [
  { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
  ...LB_DSR_CLUSTER_RULES,
  { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
];
