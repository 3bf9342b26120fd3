// From Kubernetes objects to the data plane's desired state, as a pure function: Services of type
// LoadBalancer with our class and an assigned VIP, and the endpoints their EndpointSlices list.
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { isIpv4Address } from "@portable-lb/core/config";
import type { Backend, Scheduler, VirtualService } from "../dataplane/model.ts";

export interface DesiredStateInput {
  services: V1Service[];
  slices: V1EndpointSlice[];
  loadBalancerClass: string;
  scheduler: Scheduler;
}

export interface SkippedItem {
  /** namespace/name of the object the problem is reported on. */
  object: string;
  kind: "Service" | "EndpointSlice";
  reason: string;
  message: string;
}

export interface DesiredState {
  services: VirtualService[];
  /** What was left out and why: each becomes a Kubernetes Event and a log line, never a crash. */
  skipped: SkippedItem[];
}

export function isOurs(svc: V1Service, loadBalancerClass: string): boolean {
  return svc.spec?.type === "LoadBalancer" && svc.spec.loadBalancerClass === loadBalancerClass;
}

function nameOf(o: { metadata?: { namespace?: string; name?: string } }): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}

/**
 * Endpoint weight: ready takes new flows (1); serving but terminating drains (0: established
 * flows stay, no new ones); anything else is not a backend at all.
 */
function weightOf(
  conditions: { ready?: boolean; serving?: boolean; terminating?: boolean } | undefined,
): number | undefined {
  if (conditions?.ready !== false && !conditions?.terminating) return 1;
  if (conditions.terminating && conditions.serving) return 0;
  return undefined;
}

export function desiredState(input: DesiredStateInput): DesiredState {
  const skipped: SkippedItem[] = [];
  const slicesByService = new Map<string, V1EndpointSlice[]>();
  for (const slice of input.slices) {
    const svcName = slice.metadata?.labels?.["kubernetes.io/service-name"];
    if (!svcName || slice.addressType !== "IPv4") continue;
    const key = `${slice.metadata?.namespace ?? ""}/${svcName}`;
    slicesByService.set(key, [...(slicesByService.get(key) ?? []), slice]);
  }

  const services: VirtualService[] = [];
  for (const svc of input.services) {
    if (!isOurs(svc, input.loadBalancerClass)) continue;
    const vips = (svc.status?.loadBalancer?.ingress ?? [])
      .map((i) => i.ip)
      .filter((ip): ip is string => !!ip);
    if (vips.length === 0) continue; // not allocated yet; the allocator reports its own problems
    for (const port of svc.spec?.ports ?? []) {
      const protocol = (port.protocol ?? "TCP").toLowerCase();
      if (protocol !== "tcp" && protocol !== "udp") {
        skipped.push({
          object: nameOf(svc),
          kind: "Service",
          reason: "UnsupportedProtocol",
          message: `port ${port.name ?? port.port}: protocol ${port.protocol} is not supported; use TCP or UDP`,
        });
        continue;
      }
      if (!Number.isInteger(port.port) || port.port < 1 || port.port > 65535) {
        skipped.push({
          object: nameOf(svc),
          kind: "Service",
          reason: "InvalidPort",
          message: `port ${JSON.stringify(port.port)} is not a valid port (1-65535)`,
        });
        continue;
      }
      const backends = new Map<string, Backend>();
      for (const slice of slicesByService.get(nameOf(svc)) ?? []) {
        // Slice ports match Service ports by name (kube-proxy's rule); unnamed ports are "".
        const target = (slice.ports ?? []).find(
          (p) => (p.name ?? "") === (port.name ?? "") && (p.protocol ?? "TCP").toLowerCase() === protocol,
        );
        if (!target) continue;
        if (!Number.isInteger(target.port) || target.port! < 1 || target.port! > 65535) {
          skipped.push({
            object: nameOf(slice),
            kind: "EndpointSlice",
            reason: "InvalidPort",
            message: `port ${JSON.stringify(target.port)} is not a valid port`,
          });
          continue;
        }
        for (const ep of slice.endpoints ?? []) {
          const weight = weightOf(ep.conditions);
          if (weight === undefined) continue;
          for (const ip of ep.addresses) {
            if (!isIpv4Address(ip)) {
              skipped.push({
                object: nameOf(slice),
                kind: "EndpointSlice",
                reason: "InvalidAddress",
                message: `endpoint address ${JSON.stringify(ip)} is not an IPv4 address; skipped`,
              });
              continue;
            }
            const key = `${ip}:${target.port}`;
            // The same endpoint in two slices (during a slice rebalance): ready wins over draining.
            const weightNow = Math.max(weight, backends.get(key)?.weight ?? 0);
            backends.set(key, { ip, port: target.port!, weight: weightNow });
          }
        }
      }
      for (const vip of vips) {
        services.push({
          vip,
          port: port.port,
          protocol: protocol,
          scheduler: input.scheduler,
          backends: [...backends.values()],
        });
      }
    }
  }
  return { services, skipped };
}
