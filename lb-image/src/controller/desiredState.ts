// From Kubernetes objects to the data plane's desired state, as a pure function: Services of type
// LoadBalancer with our class and an assigned VIP, and the endpoints their EndpointSlices list.
import type { V1EndpointSlice, V1NetworkPolicy, V1Service, V1ServicePort } from "@kubernetes/client-node";
import {
  HANDOVER_FROM_ANNOTATION,
  HEALTH_CHECK_ANNOTATION,
  SOURCE_RANGES_ANNOTATION,
  formatIpv4Range,
  isIpv4Address,
  parseHealthCheck,
  readSourceRanges,
  type HealthCheckSpec,
} from "@portable-lb/core/config";
import { sameItems } from "../common/sameItems.ts";
import { handoverOf } from "./handover.ts";
import type { Backend, Forwarding, Scheduler, VirtualService } from "../dataplane/model.ts";
import type { HealthTarget } from "../health/healthState.ts";
import { policiesBlockingDsr, tunnelName, tunnelRule, type LbPeers } from "./dsrPolicy.ts";

export interface DesiredStateInput extends ServedClasses {
  services: V1Service[];
  slices: V1EndpointSlice[];
  scheduler: Scheduler;
  /** How Services are served where they can be (default "snat"); see forwardingOf. */
  forwarding?: Forwarding;
  /**
   * With forwarding dsr: the NetworkPolicies of every namespace and who sends the DSR tunnel; a
   * port whose backends they keep the tunnel from is served by SNAT (see forwardingOf).
   */
  networkPolicies?: { policies: V1NetworkPolicy[]; lb: LbPeers };
  /**
   * With forwarding dsr in IPVS tunnel mode (IPIP): the nodes whose kernels cannot decapsulate it
   * (common/ipipDecap.ts); a port with backends there is served by SNAT (see forwardingOf).
   */
  nodesWithoutIpip?: ReadonlySet<string>;
  /**
   * Endpoints not ready yet (and not terminating) count too, as backends that take no flows
   * (weight 0): the node agent prepares such a pod for direct server return before the LB pods
   * send it any (nodeAgent/dsr/startingBackends.ts). The LB pods leave them out.
   */
  startingBackends?: boolean;
  /**
   * The data plane relays a handover's flows (the nftables engine's DSR; controller/handover.ts).
   * Without, a Service asking for one gets a Warning per port, and none.
   */
  relaysHandover?: boolean;
  /**
   * The data plane can pick a new flow's backend by its client's address alone, alike in every LB
   * pod (nftables; IPVS with scheduler mh): what sessionAffinity ClientIP needs. Without, a Service
   * asking for it gets a Warning, and none.
   */
  hashesOnClient?: boolean;
  /** Active health-check verdicts (see health/); without it every backend counts as healthy. */
  isUnhealthy?: (target: HealthTarget) => boolean;
  /** Carried from one call to the next: ports whose slices are the same objects are not rebuilt. */
  cache?: DesiredStateCache;
}

/**
 * Per Service port (`ns/name|port name|protocol`): the slices its backends were built from, the
 * backends and the problems found. The watch caches replace an object on every change, so the
 * same slice objects mean the same backends; with thousands of Services, one change then costs
 * one port's rebuild instead of every endpoint's. The `backends` arrays are shared, never mutated.
 */
export type DesiredStateCache = Map<
  string,
  { slices: V1EndpointSlice[]; backends: Backend[]; skipped: SkippedItem[] }
>;

export interface SkippedItem {
  /** namespace/name of the object the problem is reported on. */
  object: string;
  kind: "Service" | "EndpointSlice" | "Pod";
  /** The object's uid: `kubectl describe` shows only the Events that carry it. */
  uid?: string | undefined;
  reason: string;
  message: string;
}

export interface DesiredState {
  services: VirtualService[];
  /** What was left out and why: each becomes a Kubernetes Event and a log line, never a crash. */
  skipped: SkippedItem[];
  /** The backends Services ask to be actively checked. */
  healthTargets: HealthTarget[];
}

/** The VIPs recorded in a Service's status (what the allocator wrote there). */
export function statusVips(svc: V1Service): string[] {
  return (svc.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).filter((ip): ip is string => !!ip);
}

/** Which Services portable-lb serves: those of its class, and those of none where it is the default. */
export interface ServedClasses {
  loadBalancerClass: string;
  /** Services without spec.loadBalancerClass too (LbConfig.serveClassless). */
  serveClassless?: boolean;
}

export function isOurs(svc: V1Service, served: ServedClasses): boolean {
  if (svc.spec?.type !== "LoadBalancer") return false;
  const cls = svc.spec.loadBalancerClass;
  return cls === served.loadBalancerClass || (!cls && served.serveClassless === true);
}

type ObjectMeta = { metadata?: { namespace?: string; name?: string; uid?: string } };

function nameOf(o: ObjectMeta): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}

/** Which object a problem is reported on. */
export function refOf(o: ObjectMeta): Pick<SkippedItem, "object" | "uid"> {
  return { object: nameOf(o), uid: o.metadata?.uid };
}

/**
 * Endpoint weight: ready takes new flows (1); serving but terminating drains (0: established
 * flows stay, no new ones); not ready yet is 0 where `starting` counts it (see
 * DesiredStateInput.startingBackends); anything else is not a backend at all.
 */
function weightOf(
  conditions: { ready?: boolean; serving?: boolean; terminating?: boolean } | undefined,
  starting: boolean,
): number | undefined {
  if (conditions?.ready !== false && !conditions?.terminating) return 1;
  if (conditions.terminating && conditions.serving) return 0;
  if (starting && !conditions.terminating) return 0;
  return undefined;
}

function healthCheckOf(svc: V1Service, skipped: SkippedItem[]): HealthCheckSpec | undefined {
  const value = svc.metadata?.annotations?.[HEALTH_CHECK_ANNOTATION];
  if (value === undefined) return undefined;
  try {
    return parseHealthCheck(value);
  } catch (err) {
    skipped.push({
      ...refOf(svc),
      kind: "Service",
      reason: "InvalidHealthCheck",
      message: `annotation ${HEALTH_CHECK_ANNOTATION}: ${(err as Error).message} (got ${JSON.stringify(value)}); serving without active checks`,
    });
    return undefined;
  }
}

/**
 * The client ranges a Service admits (core's readSourceRanges: the field, else the legacy
 * annotation), as the data plane's intervals; undefined admits everyone. The API server refuses
 * invalid ranges in either place; one that came past it anyway never opens the Service: it admits
 * no one, and a Warning Event names the entries and the fix.
 */
function sourceRangesOf(svc: V1Service, skipped: SkippedItem[]): string[] | undefined {
  const read = readSourceRanges(
    svc.spec?.loadBalancerSourceRanges,
    svc.metadata?.annotations?.[SOURCE_RANGES_ANNOTATION],
  );
  if (read.invalid.length === 0) return read.ranges?.map(formatIpv4Range);
  skipped.push({
    ...refOf(svc),
    kind: "Service",
    reason: "InvalidSourceRanges",
    message: `${read.from}: ${read.invalid.map((e) => JSON.stringify(e)).join(", ")} ${read.invalid.length > 1 ? "are" : "is"} not an IP range; write CIDRs such as 203.0.113.0/24, separated by commas. No client may reach the Service until that is fixed`,
  });
  return [];
}

/**
 * Ready backends failing their active checks drain like terminating ones (weight 0). When all of
 * a port's ready backends fail, the checks are ignored (fail open, as Envoy's panic threshold):
 * more likely the probes are blocked than every backend down, and dropping all traffic would turn
 * a probe problem into an outage.
 */
function applyHealth(
  backends: Backend[],
  spec: HealthCheckSpec | undefined,
  input: DesiredStateInput,
  targets: HealthTarget[],
): Backend[] {
  if (!spec) return backends;
  const ready = backends.filter((b) => b.weight > 0).map((b) => ({ ip: b.ip, port: b.port, spec }));
  targets.push(...ready);
  const down = new Set(ready.filter((t) => input.isUnhealthy?.(t)).map((t) => `${t.ip}:${t.port}`));
  if (down.size === 0 || down.size === ready.length) return backends;
  return backends.map((b) => (down.has(`${b.ip}:${b.port}`) ? { ...b, weight: 0 } : b));
}

/** The backends the slices give one Service port, and what was wrong with them. */
function backendsOf(
  slices: V1EndpointSlice[],
  portName: string | undefined,
  protocol: string,
  starting: boolean,
): { backends: Backend[]; skipped: SkippedItem[] } {
  const skipped: SkippedItem[] = [];
  const backends = new Map<string, Backend>();
  for (const slice of slices) {
    // Slice ports match Service ports by name (kube-proxy's rule); unnamed ports are "".
    const target = (slice.ports ?? []).find(
      (p) => (p.name ?? "") === (portName ?? "") && (p.protocol ?? "TCP").toLowerCase() === protocol,
    );
    if (!target) continue;
    if (!Number.isInteger(target.port) || target.port! < 1 || target.port! > 65535) {
      skipped.push({
        ...refOf(slice),
        kind: "EndpointSlice",
        reason: "InvalidPort",
        message: `port ${JSON.stringify(target.port)} is not a valid port`,
      });
      continue;
    }
    for (const ep of slice.endpoints ?? []) {
      const weight = weightOf(ep.conditions, starting);
      if (weight === undefined) continue;
      for (const ip of ep.addresses) {
        if (!isIpv4Address(ip)) {
          skipped.push({
            ...refOf(slice),
            kind: "EndpointSlice",
            reason: "InvalidAddress",
            message: `endpoint address ${JSON.stringify(ip)} is not an IPv4 address; skipped`,
          });
          continue;
        }
        const key = `${ip}:${target.port}`;
        // The same endpoint in two slices (during a slice rebalance): ready wins over draining.
        const weightNow = Math.max(weight, backends.get(key)?.weight ?? 0);
        backends.set(key, {
          ip,
          port: target.port!,
          weight: weightNow,
          ...(ep.nodeName !== undefined && { nodeName: ep.nodeName }),
        });
      }
    }
  }
  return { backends: [...backends.values()], skipped };
}

/** Why a port asked to be served by DSR is served by SNAT (Event reasons; see forwardingOf). */
export const DSR_FALLBACK_REASONS = [
  "DirectServerReturnUnavailable",
  "DirectServerReturnBlockedByNetworkPolicy",
  "DirectServerReturnNoIpip",
] as const;

/**
 * DSR hands the packet over unchanged, so a backend must listen on the Service's own port: a port
 * whose backends listen elsewhere (targetPort differs) is served by SNAT instead, and said so. So
 * is a port whose backends NetworkPolicies keep the DSR tunnel from (`blocking`: those policies),
 * and one with backends on nodes that cannot decapsulate IPIP (`withoutIpip`, IPVS tunnel mode):
 * DSR would black-hole their traffic. Each comes back to DSR by itself once fixed.
 */
function forwardingOf(
  svc: V1Service,
  port: { name?: string; port: number },
  backends: Backend[],
  wanted: Forwarding,
  blocking: { policies: string[]; lb: LbPeers } | undefined,
  withoutIpip: ReadonlySet<string> | undefined,
  skipped: SkippedItem[],
): Forwarding {
  if (wanted !== "dsr") return wanted;
  const elsewhere = [...new Set(backends.filter((b) => b.port !== port.port).map((b) => b.port))];
  const snat = "served through SNAT instead (backends see the LB pod's address, not the client's)";
  if (elsewhere.length > 0) {
    skipped.push({
      ...refOf(svc),
      kind: "Service",
      reason: DSR_FALLBACK_REASONS[0],
      message: `port ${port.name ?? port.port}: its backends listen on ${elsewhere.join(", ")}, not on ${port.port}, and direct server return cannot change the port; ${snat}. Set targetPort to ${port.port} to have it served by DSR`,
    });
    return "snat";
  }
  const noIpip = [
    ...new Set(backends.flatMap((b) => (b.nodeName && withoutIpip?.has(b.nodeName) ? [b.nodeName] : []))),
  ].sort();
  if (noIpip.length > 0) {
    skipped.push({
      ...refOf(svc),
      kind: "Service",
      reason: DSR_FALLBACK_REASONS[2],
      message: `port ${port.name ?? port.port}: backends run on node${noIpip.length > 1 ? "s" : ""} ${noIpip.join(", ")}, whose kernel${noIpip.length > 1 ? "s have" : " has"} no ipip (as their node agents found), and the LB pods (dataPlane.engine ipvs) tunnel in IPIP; ${snat}. To have it served by DSR, load ipip there (modprobe ipip) and restart the node agent on each, or set dataPlane.engine nftables (VXLAN)`,
    });
    return "snat";
  }
  if (!blocking || blocking.policies.length === 0) return "dsr";
  skipped.push({
    ...refOf(svc),
    kind: "Service",
    reason: DSR_FALLBACK_REASONS[1],
    message: `port ${port.name ?? port.port}: NetworkPolicy ${blocking.policies.join(", ")} selects its backends and allows no ${tunnelName(blocking.lb)} (the DSR tunnel) from the LB pods, so direct server return would drop its traffic; ${snat}. To have it served by DSR, add this ingress rule to ${blocking.policies.length > 1 ? "one of them" : "it"}: ${JSON.stringify(tunnelRule(blocking.lb))}`,
  });
  return "snat";
}

/**
 * sessionAffinity ClientIP: each LB pod picks a new flow's backend by the client's address alone,
 * from the same Maglev table as every other, so no state is shared and none is lost with an LB pod.
 * timeoutSeconds is not a timer here: a client keeps its backend while the backends stay the same,
 * however long it is idle; when they change, Maglev moves only the clients of the slots that
 * changed (README, "Session affinity").
 */
function affinityOf(
  svc: V1Service,
  input: DesiredStateInput,
  skipped: SkippedItem[],
): "clientIP" | undefined {
  if (svc.spec?.sessionAffinity !== "ClientIP") return undefined;
  if (input.hashesOnClient === true) return "clientIP";
  skipped.push({
    ...refOf(svc),
    kind: "Service",
    reason: "SessionAffinityUnsupported",
    message: `spec.sessionAffinity ClientIP is not honoured: with dataPlane.scheduler ${input.scheduler}, IPVS in each LB pod picks a connection's backend on its own, and the router spreads a client's connections over the LB pods, so they reach different backends. Set dataPlane.scheduler mh (Maglev, which then hashes the client's address alone), or sessionAffinity None to silence this Warning`,
  });
  return undefined;
}

/**
 * externalTrafficPolicy Local asks that the client's address reach the backend. The LB pods send a
 * flow straight to a ready endpoint's pod, never through another node's NodePort, so what remains
 * of Local is the address: direct server return keeps it, SNAT does not. A Local port served by SNAT
 * is still served (as a cloud LB would rather than drop it), with a Warning saying so.
 */
function localPolicyUnmet(
  svc: V1Service,
  port: V1ServicePort,
  wanted: Forwarding,
  skipped: SkippedItem[],
): void {
  skipped.push({
    ...refOf(svc),
    kind: "Service",
    reason: "ExternalTrafficPolicyLocalUnmet",
    message:
      `port ${port.name ?? port.port}: spec.externalTrafficPolicy Local asks that backends see the client's address, but the port is served through SNAT ` +
      (wanted === "dsr"
        ? "(its DirectServerReturn Event says why), so they see the LB pod's. Fix what that Event names to have it served by DSR"
        : "(dataPlane.mode snat on this platform), so they see the LB pod's. Set dataPlane.mode dsr to have the client's address reach them, or set the policy to Cluster to silence this Warning"),
  });
}

/** Whether a port's handover is relayed; a Warning says why not where it cannot be. */
function relayedHandover(
  svc: V1Service,
  port: V1ServicePort,
  forwarding: Forwarding,
  relays: boolean,
  skipped: SkippedItem[],
): boolean {
  if (forwarding === "dsr" && relays) return true;
  const why = !relays
    ? "this data plane (IPVS) cannot relay flows; set dataPlane.engine nftables on this platform"
    : "the port is served by SNAT (see its other Events), and only DSR relays flows";
  skipped.push({
    ...refOf(svc),
    kind: "Service",
    reason: "HandoverUnsupported",
    message: `port ${port.name ?? port.port}: annotation ${HANDOVER_FROM_ANNOTATION} is not honoured: ${why}. Connections the router moves here from the old platform are reset`,
  });
  return false;
}

export function desiredState(input: DesiredStateInput): DesiredState {
  const skipped: SkippedItem[] = [];
  // Refilled with this call's entries only, so deleted Services and ports do not linger.
  const previous = input.cache && new Map(input.cache);
  input.cache?.clear();
  const healthTargets: HealthTarget[] = [];
  const slicesByService = new Map<string, V1EndpointSlice[]>();
  for (const slice of input.slices) {
    const svcName = slice.metadata?.labels?.["kubernetes.io/service-name"];
    if (!svcName || slice.addressType !== "IPv4") continue;
    const key = `${slice.metadata?.namespace ?? ""}/${svcName}`;
    slicesByService.set(key, [...(slicesByService.get(key) ?? []), slice]);
  }

  const policiesByNamespace = new Map<string, V1NetworkPolicy[]>();
  for (const policy of input.networkPolicies?.policies ?? []) {
    const ns = policy.metadata?.namespace ?? "";
    const list = policiesByNamespace.get(ns) ?? [];
    list.push(policy);
    policiesByNamespace.set(ns, list);
  }

  const services: VirtualService[] = [];
  for (const svc of input.services) {
    if (!isOurs(svc, input)) continue;
    const vips = statusVips(svc);
    if (vips.length === 0) continue; // not allocated yet; the allocator reports its own problems
    const check = healthCheckOf(svc, skipped);
    const sourceRanges = sourceRangesOf(svc, skipped);
    const handover = handoverOf(svc, refOf(svc), skipped);
    const affinity = affinityOf(svc, input, skipped);
    const netpol = input.forwarding === "dsr" ? input.networkPolicies : undefined;
    const blocking = netpol && {
      policies: policiesBlockingDsr(
        svc,
        policiesByNamespace.get(svc.metadata?.namespace ?? "") ?? [],
        netpol.lb,
      ),
      lb: netpol.lb,
    };
    for (const port of svc.spec?.ports ?? []) {
      const protocol = (port.protocol ?? "TCP").toLowerCase();
      if (protocol !== "tcp" && protocol !== "udp") {
        skipped.push({
          ...refOf(svc),
          kind: "Service",
          reason: "UnsupportedProtocol",
          message: `port ${port.name ?? port.port}: protocol ${port.protocol} is not supported; use TCP or UDP`,
        });
        continue;
      }
      if (!Number.isInteger(port.port) || port.port < 1 || port.port > 65535) {
        skipped.push({
          ...refOf(svc),
          kind: "Service",
          reason: "InvalidPort",
          message: `port ${JSON.stringify(port.port)} is not a valid port (1-65535)`,
        });
        continue;
      }
      const slices = slicesByService.get(nameOf(svc)) ?? [];
      const memoKey = `${nameOf(svc)}|${port.name ?? ""}|${protocol}`;
      let built = previous?.get(memoKey);
      if (!built || !sameItems(built.slices, slices))
        built = { slices, ...backendsOf(slices, port.name, protocol, input.startingBackends === true) };
      input.cache?.set(memoKey, built);
      skipped.push(...built.skipped);
      const checked = applyHealth(built.backends, check, input, healthTargets);
      const forwarding = forwardingOf(
        svc,
        port,
        checked,
        input.forwarding ?? "snat",
        blocking,
        input.nodesWithoutIpip,
        skipped,
      );
      if (svc.spec?.externalTrafficPolicy === "Local" && forwarding !== "dsr")
        localPolicyUnmet(svc, port, input.forwarding ?? "snat", skipped);
      const relayed =
        handover && relayedHandover(svc, port, forwarding, input.relaysHandover === true, skipped);
      for (const vip of vips) {
        services.push({
          vip,
          port: port.port,
          protocol: protocol,
          scheduler: input.scheduler,
          forwarding,
          backends: checked,
          ...(sourceRanges && { sourceRanges }),
          ...(relayed && { handover }),
          ...(affinity && { affinity }),
        });
      }
    }
  }
  return { services, skipped, healthTargets };
}
