// nftables as portable-lb programs it: per virtual service, a Maglev lookup table of backends
// ("slots"). This is also exactly what can be read back from the kernel, so restarts adopt the
// rules that are there instead of flushing them.
import { canonical, compareKeys, serviceKey, type VirtualService } from "../model.ts";
import { maglevTable } from "./maglev.ts";

export const NFT_TABLE = "portable_lb";

export interface NftService {
  protocol: "tcp" | "udp";
  vip: string;
  port: number;
  /** Slot i: the backend ("ip . port") for hash i. Empty: no backend can take new flows. */
  slots: string[];
}

export function toNft(desired: VirtualService[]): NftService[] {
  return canonical(desired).map((s) => {
    const table = maglevTable(s.backends);
    return {
      protocol: s.protocol,
      vip: s.vip,
      port: s.port,
      slots: table.map((i) => `${s.backends[i]!.ip} . ${s.backends[i]!.port}`),
    };
  });
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
