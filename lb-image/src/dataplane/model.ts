// The data plane's desired state: for every VIP:port, the backends and how to pick one. Both
// engines (IPVS, nftables) render exactly this, so they cannot disagree on what to serve.

export const SCHEDULERS = ["mh", "rr", "wrr", "lc"] as const;
export type Scheduler = (typeof SCHEDULERS)[number];
export type Protocol = "tcp" | "udp";
/**
 * How a service's packets reach its backends. "snat": the LB rewrites the destination and
 * masquerades the source, so replies come back through it whatever the backends' routes.
 * "dsr": the LB encapsulates toward the backend, which replies to the client directly (the
 * backend must hold the VIP, and its port must be the service's: no port remapping).
 */
export const FORWARDINGS = ["snat", "dsr"] as const;
export type Forwarding = (typeof FORWARDINGS)[number];

export interface Backend {
  ip: string;
  port: number;
  /** 0 drains the backend: no new flows, established ones kept. */
  weight: number;
  /** The node the backend runs on (its EndpointSlice endpoint's nodeName), when known. */
  nodeName?: string;
}

export interface VirtualService {
  vip: string;
  port: number;
  protocol: Protocol;
  scheduler: Scheduler;
  /** "snat" when absent. */
  forwarding?: Forwarding;
  backends: Backend[];
  /**
   * The client addresses admitted (the Service's loadBalancerSourceRanges), as IPv4 intervals
   * "first-last", merged and sorted; [] admits none. Absent: every address (firewall/).
   */
  sourceRanges?: string[];
  /**
   * A migration by BGP (nftables DSR only): the flows this LB pod did not see start are relayed to
   * the LB nodes of the platform that served the VIP before, through the DSR tunnel, so that
   * connections the router moves here mid-flight reach their old backends (controller/handover.ts).
   */
  handover?: Handover;
  /**
   * The Service's sessionAffinity ClientIP: a new flow's backend is picked by the client's address
   * alone (its port left out of the hash), so every connection of a client, through whichever LB
   * pod the router picks for it, reaches the same backend while the backends stay the same.
   */
  affinity?: "clientIP";
}

export interface Handover {
  /** The old platform's LB node addresses, sorted. */
  to: string[];
  /**
   * "all": every flow new to this pod, new connections too (while both platforms announce the VIP,
   * the router's set of next hops still changes); "established": TCP packets of connections this pod
   * did not see start (after the old platform withdrew: new connections are served here).
   */
  relay: "all" | "established";
}

/** Identity of a virtual service: one per protocol, VIP and port. */
export function serviceKey(s: Pick<VirtualService, "protocol" | "vip" | "port">): string {
  return `${s.protocol}:${s.vip}:${s.port}`;
}

/** The inverse of serviceKey. */
export function parseServiceKey(key: string): Pick<VirtualService, "protocol" | "vip" | "port"> {
  const [protocol, vip = "", port] = key.split(":");
  return { protocol: protocol === "udp" ? "udp" : "tcp", vip, port: Number(port) };
}

export function backendKey(b: Pick<Backend, "ip" | "port">): string {
  return `${b.ip}:${b.port}`;
}

/** Sorted by key, backends too: equal states compare equal as values. */
export function canonical(services: VirtualService[]): VirtualService[] {
  return [...services]
    .map((s) => ({
      ...s,
      backends: [...s.backends].sort((a, b) => compareKeys(backendKey(a), backendKey(b))),
    }))
    .sort((a, b) => compareKeys(serviceKey(a), serviceKey(b)));
}

/** Plain string order of keys, so every sort of services and backends agrees. */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The kernel's count of connections a virtual service has taken since its rules were made. */
export interface VipCounter {
  vip: string;
  port: number;
  protocol: "tcp" | "udp";
  connections: number;
}
