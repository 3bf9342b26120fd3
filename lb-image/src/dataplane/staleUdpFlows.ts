// UDP flows to a backend that has left. Through SNAT, conntrack holds each UDP flow's NAT for as
// long as packets keep coming (30 s unreplied, 120 s once answered), so a client sending from a
// fixed port (DNS resolvers, QUIC, game and VoIP clients) would keep reaching a gone backend and
// never move on: as kube-proxy does, those entries are deleted once the backend leaves the service.
// A draining backend (weight 0) keeps its flows. DSR needs none of this (its flow table passes over
// an entry whose backend's tunnel route is gone), nor TCP (a gone backend's peer answers, or the
// connection times out and the client opens a new one).
import { CommandError, run, withPrefix } from "./exec.ts";
import { backendKey, serviceKey, type VirtualService } from "./model.ts";

export interface StaleUdpFlow {
  vip: string;
  port: number;
  backend: { ip: string; port: number };
}

/** The (UDP, SNAT) service·backend pairs in `before` that `after` no longer has. */
export function staleUdpFlows(
  before: readonly VirtualService[],
  after: readonly VirtualService[],
): StaleUdpFlow[] {
  const now = new Map(after.map((s) => [serviceKey(s), s]));
  const stale: StaleUdpFlow[] = [];
  for (const s of before) {
    if (s.protocol !== "udp" || s.forwarding === "dsr") continue;
    const next = now.get(serviceKey(s));
    const kept = new Set(next ? next.backends.map(backendKey) : []);
    for (const b of s.backends)
      if (!kept.has(backendKey(b)))
        stale.push({ vip: s.vip, port: s.port, backend: { ip: b.ip, port: b.port } });
  }
  return stale;
}

/** conntrack says it deleted nothing with exit status 1; that is not a failure here. */
const NOTHING_DELETED = /\b0 flow entries have been deleted/;

/**
 * Deletes the conntrack entries of those flows (the command behind `prefix`, as every tool): by
 * the client's destination (VIP, port) and the address NAT gave it (the backend's). Returns how
 * many commands ran; throws the first failure after trying them all.
 */
export async function flushStaleUdpFlows(prefix: string[], flows: readonly StaleUdpFlow[]): Promise<number> {
  let failure: Error | undefined;
  for (const f of flows) {
    const argv = withPrefix(prefix, "conntrack");
    argv.push("-D", "-p", "udp", "--orig-dst", f.vip, "--orig-port-dst", String(f.port));
    argv.push("--reply-src", f.backend.ip, "--reply-port-src", String(f.backend.port));
    await run(argv, "", 10_000).catch((err: unknown) => {
      if (err instanceof CommandError && NOTHING_DELETED.test(err.message)) return;
      failure ??= err instanceof Error ? err : new Error(String(err));
    });
  }
  if (failure) throw failure;
  return flows.length;
}
