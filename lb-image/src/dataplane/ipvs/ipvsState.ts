// IPVS as `ipvsadm -Sn` shows it (virtual services with scheduler, scheduler flags and real servers),
// plus whether an mh service's real servers sit in the kernel in canonical order (/proc/net/ip_vs).
// Desired state maps onto it one to one, so diffing two IpvsStates is all the engine needs.
import {
  backendKey,
  canonical,
  compareKeys,
  serviceKey,
  type Forwarding,
  type VirtualService,
} from "../model.ts";

export type ForwardingMethod = "masq" | "gate" | "ipip";

export interface IpvsServer {
  ip: string;
  port: number;
  weight: number;
  method: ForwardingMethod;
}

export interface IpvsService {
  protocol: "tcp" | "udp";
  vip: string;
  port: number;
  /** Any scheduler the kernel has: what we find may have been set by someone else. */
  scheduler: string;
  /** Scheduler flags (`-b`), sorted. */
  flags: string[];
  /** Real servers, sorted by address (the kernel's own order is `inOrder`). */
  servers: IpvsServer[];
  /**
   * For mh: whether the kernel's list of real servers is in canonical order (added in address
   * order). ip_vs_mh fills its Maglev table walking that list, so two LBs whose lists differ in
   * order (different histories of adds and deletes) pick different backends for some flows.
   * Always true for other schedulers, whose choice does not depend on it.
   */
  inOrder: boolean;
}

/**
 * Maglev hashing over source address and port (mh-port), so flows from one client spread; with
 * mh-fallback a new flow skips a server that is unavailable. Every LB pod behind ECMP builds the
 * same table from the same servers in the same order, so a flow rehashed to another LB pod keeps
 * its backend. With client affinity, over the source address alone (no mh-port): every connection
 * of a client reaches one backend, through every LB pod. (Affinity asks for mh: desiredState.)
 */
function schedulerFlags(s: Pick<VirtualService, "scheduler" | "affinity">): string[] {
  if (s.scheduler !== "mh") return [];
  return s.affinity === "clientIP" ? ["mh-fallback"] : ["mh-fallback", "mh-port"];
}

/**
 * NAT (destination rewritten; the engine's nft table masquerades the source: ipvsSnat.ts) for
 * "snat" services, so replies come back through the LB; IPIP tunnelling for "dsr" ones, whose
 * backends decapsulate and reply to the client from the VIP themselves.
 */
const METHOD: Record<Forwarding, ForwardingMethod> = { snat: "masq", dsr: "ipip" };

export function toIpvs(desired: VirtualService[]): IpvsService[] {
  return canonical(desired).map((s) => {
    if (s.forwarding === "dsr") {
      // IPVS tunnels to the service's own port (ipvsadm rewrites any other), so a remapped port
      // would never read back as applied: refused here, before anything is written.
      const remapped = s.backends.find((b) => b.port !== s.port);
      if (remapped)
        throw new Error(
          `service ${serviceKey(s)}: forwarding "dsr" cannot remap port ${s.port} to backend ${backendKey(remapped)}; give the backends the service's port or use forwarding "snat"`,
        );
    }
    return {
      protocol: s.protocol,
      vip: s.vip,
      port: s.port,
      scheduler: s.scheduler,
      flags: schedulerFlags(s),
      servers: s.backends.map((b) => ({
        ip: b.ip,
        port: b.port,
        weight: b.weight,
        method: METHOD[s.forwarding ?? "snat"],
      })),
      inOrder: true,
    };
  });
}

/** Sorted the way toIpvs sorts, so states compare as values. */
export function sortIpvs(state: IpvsService[]): IpvsService[] {
  return [...state]
    .map((s) => ({
      ...s,
      flags: [...s.flags].sort(),
      servers: [...s.servers].sort((a, b) => compareKeys(backendKey(a), backendKey(b))),
    }))
    .sort((a, b) => compareKeys(serviceKey(a), serviceKey(b)));
}

/**
 * Whether `kernelOrder` (backend keys as the kernel lists them: the last added first) is what
 * adding `servers` in canonical order gives. Only mh depends on it.
 */
export function inCanonicalOrder(scheduler: string, kernelOrder: string[]): boolean {
  if (scheduler !== "mh") return true;
  const added = [...kernelOrder].reverse();
  return added.every((k, i) => i === 0 || compareKeys(added[i - 1]!, k) < 0);
}
