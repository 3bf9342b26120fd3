// IPVS as `ipvsadm -Sn` shows it: virtual services with scheduler, scheduler flags and real servers.
// Desired state maps onto it one to one, so diffing two IpvsStates is all the engine needs.
import {
  backendKey,
  canonical,
  compareKeys,
  serviceKey,
  type Scheduler,
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
  servers: IpvsServer[];
}

/**
 * Maglev hashing over source address and port (mh-port), so flows from one client spread; with
 * mh-fallback a new flow skips a server that is unavailable. Every LB pod behind ECMP builds the
 * same table from the same servers, so a flow rehashed to another LB pod keeps its backend.
 */
const SCHEDULER_FLAGS: Record<Scheduler, string[]> = {
  mh: ["mh-fallback", "mh-port"],
  rr: [],
  wrr: [],
  lc: [],
};

/** NAT (masquerading) toward backends: replies must come back through the LB (paper Fig. 5.5). */
export function toIpvs(desired: VirtualService[]): IpvsService[] {
  return canonical(desired).map((s) => ({
    protocol: s.protocol,
    vip: s.vip,
    port: s.port,
    scheduler: s.scheduler,
    flags: SCHEDULER_FLAGS[s.scheduler],
    servers: s.backends.map((b) => ({ ip: b.ip, port: b.port, weight: b.weight, method: "masq" })),
  }));
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
