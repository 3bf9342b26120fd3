// The node agent prepares a DSR backend pod (the decap device, its VIPs on `lo`) as soon as its
// endpoint is listed, before it is ready: the LB pods send a pod flows, and announce a new
// Service's VIP, the moment it is ready, and a pod not prepared by then answers them with ICMP host
// unreachable (the VIP is not its own). Which ports are served by DSR stays the controller's
// decision, made on the ready endpoints alone (the same desiredState call the LB pods make).
import { backendKey, serviceKey, type VirtualService } from "../../dataplane/model.ts";

/**
 * `decided` (desiredState as the LB pods compute it) with, on each DSR service, the endpoints that
 * `withStarting` (the same with startingBackends) adds: not ready yet, weight 0.
 */
export function withStartingBackends(
  decided: VirtualService[],
  withStarting: VirtualService[],
): VirtualService[] {
  const starting = new Map(withStarting.map((s) => [serviceKey(s), s.backends]));
  return decided.map((s) => {
    if (s.forwarding !== "dsr") return s;
    const known = new Set(s.backends.map(backendKey));
    const added = (starting.get(serviceKey(s)) ?? []).filter((b) => !known.has(backendKey(b)));
    return added.length ? { ...s, backends: [...s.backends, ...added.map((b) => ({ ...b, weight: 0 }))] } : s;
  });
}
