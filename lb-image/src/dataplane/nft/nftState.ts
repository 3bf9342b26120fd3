// nftables as portable-lb programs it: per virtual service, a Maglev lookup table of backends
// ("slots"). This is also exactly what can be read back from the kernel, so restarts adopt the
// rules that are there instead of flushing them.
import {
  backendKey,
  canonical,
  compareKeys,
  serviceKey,
  type Backend,
  type Forwarding,
  type VirtualService,
} from "../model.ts";
import { backendMark } from "../dsr/dsrTunnel.ts";
import { maglevTable } from "./maglev.ts";

export const NFT_TABLE = "portable_lb";

export interface NftService {
  protocol: "tcp" | "udp";
  vip: string;
  port: number;
  forwarding: Forwarding;
  /**
   * The backends that own slots, in the order of their first slot, as nft prints them: "ip . port"
   * (snat: the address the destination is rewritten to) or a mark such as "0x0af40105" (dsr: the
   * backend pod's tunnel, see dsr/dsrTunnel.ts).
   */
  backends: string[];
  /**
   * Slot i: the index in `backends` of the backend for hash i. Empty: no backend can take new
   * flows. Two bytes a slot rather than a reference (eight): 10,000 services hold 2.5 M slots.
   */
  slots: Uint16Array;
  /**
   * A handover's relay (TCP, relay "established"; controller/handover.ts): slot i of the lookup
   * table of the packets of connections this pod did not see start, as the old platform's LB node
   * marks.
   * With relay "all" the relay is the service's own table instead (`backends` are those marks).
   */
  relay?: string[];
  /** The service's lookup table is hashed on the client's address alone (VirtualService.affinity). */
  affinity?: "clientIP";
  /**
   * Read back from a service chain that does not hold exactly one rule of ours: why. Never equal
   * to a rendered service, so the diff rewrites the chain.
   */
  broken?: string;
}

/**
 * The service's lookup table from one label per slot, in the one form both rendering and reading
 * back give: backends numbered by first slot, so equal tables are equal values.
 */
export function lookupTable(labels: ArrayLike<string>): Pick<NftService, "backends" | "slots"> {
  const index = new Map<string, number>();
  const backends: string[] = [];
  const slots = new Uint16Array(labels.length);
  for (let i = 0; i < labels.length; i++) {
    const label = labels[i]!;
    let b = index.get(label);
    if (b === undefined) {
      b = backends.push(label) - 1;
      index.set(label, b);
    }
    slots[i] = b;
  }
  return { backends, slots };
}

/** A DSR backend's slot label: its mark as `nft -n` prints it. */
export function markLabel(ip: string): string {
  return `0x${backendMark(ip).toString(16).padStart(8, "0")}`;
}

/** The slot label of a backend under a service's forwarding. */
function slotLabel(b: Backend, forwarding: Forwarding): string {
  return forwarding === "dsr" ? markLabel(b.ip) : `${b.ip} . ${b.port}`;
}

/**
 * Service key → what a service was last rendered from (its backends array, its rules' shape, and
 * the backend set with weights as text) and the result.
 */
export type NftRenderCache = Map<
  string,
  { key: string; source: Backend[]; shape: string; backends: string; service: NftService }
>;

/**
 * What shapes a service's rules besides its backends (a handover, affinity) as text, to tell by a
 * string compare whether it changed.
 */
function shapeText(s: VirtualService): string {
  const handover =
    s.forwarding === "dsr" && s.handover ? `${s.handover.relay}:${s.handover.to.join(",")}` : "";
  return `${handover}|${s.affinity ?? ""}`;
}

/**
 * With a `cache` (refilled with this rendering), a service whose backends did not change comes back
 * as the same object without recomputing its Maglev table: a change usually touches one service of
 * thousands, and the diff skips comparing the slots of identical objects. The same backends array
 * as last time (the desired state reuses unchanged ones, never mutating them) is not even sorted.
 */
export function toNft(desired: VirtualService[], cache?: NftRenderCache): NftService[] {
  const rendered = desired
    .map((s) => ({ key: serviceKey(s), s }))
    .sort((a, b) => compareKeys(a.key, b.key))
    .map(({ key, s }) => {
      const hit = cache?.get(key);
      const forwarding = s.forwarding ?? "snat";
      const shape = shapeText(s);
      if (hit?.source === s.backends && hit.service.forwarding === forwarding && hit.shape === shape)
        return hit;
      const sorted = canonical([s])[0]!.backends;
      const backends = `${forwarding}:${shape}:${sorted.map((b) => `${backendKey(b)}/${b.weight}`).join(",")}`;
      if (hit?.backends === backends)
        return { key, source: s.backends, shape, backends, service: hit.service };
      const peers = forwarding === "dsr" ? s.handover?.to.map(markLabel) : undefined;
      const labels = sorted.map((b) => slotLabel(b, forwarding));
      const table =
        peers && s.handover?.relay === "all"
          ? lookupTable(peers)
          : lookupTable(maglevTable(sorted).map((i) => labels[i]!));
      const relay = peers && s.handover?.relay === "established" && s.protocol === "tcp" ? peers : undefined;
      return {
        key,
        source: s.backends,
        shape,
        backends,
        service: {
          protocol: s.protocol,
          vip: s.vip,
          port: s.port,
          forwarding,
          ...table,
          ...(relay && { relay }),
          // A service without a backend drops, whatever it would hash on.
          ...(s.affinity && table.slots.length > 0 && { affinity: s.affinity }),
        },
      };
    });
  if (cache) {
    cache.clear();
    for (const r of rendered) cache.set(r.key, r);
  }
  return rendered.map((r) => r.service);
}

/** In toNft's order (by service key), so states compare as values. */
export function sortNft(services: NftService[]): NftService[] {
  return [...services].sort((a, b) => compareKeys(serviceKey(a), serviceKey(b)));
}

/** Stable chain name suffix per service, e.g. svc_tcp_0a01010a_80. */
export function objectId(s: Pick<NftService, "protocol" | "vip" | "port">): string {
  const hex = s.vip
    .split(".")
    .map((o) => Number(o).toString(16).padStart(2, "0"))
    .join("");
  return `${s.protocol}_${hex}_${s.port}`;
}
