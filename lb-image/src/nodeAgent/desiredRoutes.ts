// What the node agent wants in the node's routing table, as a pure function of the LB pods it
// sees and the routes the node holds now: every VIP pool routed to this node's LB pod. The upstream
// router sends VIP traffic to the node's address (the BGP next hop); these routes hand it to the
// pod, which accepts the VIP locally.
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

/** The LB pods of this node that have an address. */
const podsHere = (nodeName: string, pods: LbPodState[]) =>
  pods.filter((p) => p.nodeName === nodeName && p.ip);

/**
 * Ready LB pods on this node take the pools. With none ready, the pods the pools are routed to now
 * keep them while they exist (not ready, or terminating): such a pod stops announcing first (the
 * node agent tells it it is not ready, see lbPodVerdict), and its flows keep arriving until the
 * router has applied the withdrawal, so the route must outlive the announcement. A starting pod
 * (never ready, so never routed) gets nothing: its rules are not applied yet. No pod: no route, so
 * the node never blackholes VIP traffic behind a route to a pod that is gone.
 */
export function desiredRoutes(
  nodeName: string,
  pods: LbPodState[],
  pools: string[],
  routedNow: string[] = [],
): NodeRoute[] {
  const here = podsHere(nodeName, pods);
  const ready = here.filter((p) => p.ready && !p.terminating);
  const chosen = ready.length > 0 ? ready : here.filter((p) => routedNow.includes(p.ip!));
  const via = [...new Set(chosen.map((p) => p.ip!))].sort();
  if (via.length === 0) return [];
  return [...new Set(pools)].sort().map((prefix) => ({ prefix, via }));
}

/** The next hops the node's routes of our protocol point at now. */
export function routedVia(routes: NodeRoute[]): string[] {
  return [...new Set(routes.flatMap((r) => r.via))].sort();
}

/** What the node agent tells an LB pod that asks about itself (its node-route check). */
export interface LbPodVerdict {
  /** Every VIP pool of this node is routed to the pod. */
  routed: boolean;
  /** The pod's Ready condition (false also for a terminating pod or one this node does not run). */
  ready: boolean;
}

export function lbPodVerdict(
  nodeName: string,
  pods: LbPodState[],
  routes: NodeRoute[],
  pools: string[],
  podIp: string,
): LbPodVerdict {
  const pod = podsHere(nodeName, pods).find((p) => p.ip === podIp);
  const prefixes = new Set(routes.filter((r) => r.via.includes(podIp)).map((r) => r.prefix));
  return {
    routed: pools.length > 0 && pools.every((p) => prefixes.has(p)),
    ready: pod !== undefined && pod.ready && !pod.terminating,
  };
}
