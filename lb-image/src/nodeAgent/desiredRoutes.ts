// What the node agent wants in the node's routing table, as a pure function of the LB pods it
// sees: every VIP pool routed to this node's LB pod. The upstream router sends VIP traffic to the
// node's address (the BGP next hop); these routes hand it to the pod, which accepts the VIP locally.
import type { V1Pod } from "@kubernetes/client-node";

export interface LbPodState {
  name: string;
  nodeName: string | undefined;
  ip: string | undefined;
  /** The Ready condition: the controller has applied its rules and is not draining. */
  ready: boolean;
  /** Deletion requested: the pod drains its established connections until it is gone. */
  terminating: boolean;
}

export interface NodeRoute {
  prefix: string;
  /** Next hops (LB pod IPs), sorted; more than one makes a multipath route. */
  via: string[];
}

export function lbPodState(pod: V1Pod): LbPodState {
  return {
    name: pod.metadata?.name ?? "",
    nodeName: pod.spec?.nodeName,
    ip: pod.status?.podIP,
    ready: pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    terminating: pod.metadata?.deletionTimestamp !== undefined,
  };
}

/**
 * Ready LB pods on this node take the pools. With none ready, a terminating pod that still has
 * its address keeps them: its established flows still arrive while the router converges on the
 * withdrawal, and a missing route would send them back out of the node. A starting pod (not ready,
 * not terminating) gets nothing: its rules are not applied yet. No pod: no route, so the node
 * never blackholes VIP traffic behind a route to a pod that is gone.
 */
export function desiredRoutes(nodeName: string, pods: LbPodState[], pools: string[]): NodeRoute[] {
  const here = pods.filter((p) => p.nodeName === nodeName && p.ip);
  const ready = here.filter((p) => p.ready && !p.terminating);
  const chosen = ready.length > 0 ? ready : here.filter((p) => p.terminating);
  const via = [...new Set(chosen.map((p) => p.ip!))].sort();
  if (via.length === 0) return [];
  return [...new Set(pools)].sort().map((prefix) => ({ prefix, via }));
}
