// Inputs of the BGP configuration renderers (route reflector, upstream router, LB speaker).

/** BFD timers; defaults 300 ms × 3 (detects a dead peer in under a second). */
export interface BfdTimers {
  minRxMs: number;
  minTxMs: number;
  multiplier: number;
}

export interface BgpTimers {
  holdTimeS: number;
  keepaliveS: number;
}

export interface RouteReflectorConfigInput {
  /** The reflector's own address (router id and the address the upstream router peers with). */
  routerId: string;
  /** iBGP AS number shared by speakers, reflectors and the upstream router. */
  asn: number;
  /** LB speakers may connect from any address in these ranges (dynamic neighbors; the pod CIDR). */
  speakerRanges: string[];
  /**
   * The reflector's address LB speakers connect to, when not `routerId`: its overlay (pod-network)
   * address, so the overlay's masquerade does not replace the pod's source address (paper §3.3).
   * Speaker sessions are multihop, and BIRD needs a fixed local address for multihop BFD.
   */
  speakerLocalAddress?: string;
  /**
   * The VIP pools: the reflector accepts from speakers only host routes inside them, so a pod
   * on the pod network cannot announce (hijack) any other prefix through it.
   */
  vipPrefixes: string[];
  /** Upstream routers the reflector sends all paths to. */
  upstreamRouters: string[];
  bfd: BfdTimers;
  timers: BgpTimers;
  /** Seconds peers keep our routes while we restart (graceful restart). */
  gracefulRestartS: number;
  /** TCP MD5 password, when set, on every session. */
  password?: string;
}

export interface UpstreamRouterConfigInput {
  asn: number;
  /** The router's own address (router id). */
  routerId: string;
  /** Addresses of the route reflectors to peer with. */
  routeReflectors: string[];
  /** ECMP fan-out: how many equal-cost next hops the router installs per prefix. */
  maximumPaths: number;
  bfd: BfdTimers;
  timers: BgpTimers;
  password?: string;
  /**
   * Names this platform's peer group, BFD profile and route-map (`portable-lb-<name>-…`), so the
   * snippets of several platforms can sit side by side in one router's config.
   */
  platformName?: string;
}

export interface SpeakerConfigInput {
  /** The LB pod's address: router id and the source of its sessions. */
  routerId: string;
  asn: number;
  /** The route reflectors' speaker-facing (overlay) addresses. */
  routeReflectors: string[];
  /** The node's address: the next hop routers send VIP traffic to (the node agent forwards it). */
  nextHop: string;
  /** The VIPs this pod announces now: programmed, with at least one ready endpoint. */
  vips: string[];
  /**
   * The reflectors (of `routeReflectors`) the VIPs are exported to; the others' sessions stay up
   * but carry nothing (e.g. until their BFD session is Up). All of them when omitted.
   */
  exportTo?: string[];
  bfd: BfdTimers;
  timers: BgpTimers;
  gracefulRestartS: number;
  password?: string;
}
