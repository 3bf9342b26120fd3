// What the DSR fast path (lb-image/fastpath) carries, as a function of the desired state: the DSR
// services with their Maglev tables exactly as the nftables engine renders them (toNft), so the two
// paths pick the same backend for every flow, and every DSR backend (draining ones too: a flow the
// fast path has seen keeps its backend while that backend is one, as the kernel path's flow table
// keeps it while its tunnel exists). Services restricted to source ranges, relaying a handover
// (controller/handover.ts) or with client affinity (a table hashed on the client's address alone)
// stay on the kernel path, where the firewall is (tc ingress runs before netfilter) and the rule for
// each; so do services with no backend that takes new flows (the kernel path drops their packets).
import { numberToIpv4 } from "../ipv4.ts";
import { compareKeys, serviceKey, type VirtualService } from "../model.ts";
import { toNft, type NftRenderCache, type NftService } from "../nft/nftState.ts";
import type { FastPathService } from "./fastPath.ts";

export interface FastPathPlan {
  services: FastPathService[];
  backends: string[];
}

const ipOfMark = (label: string) => numberToIpv4(Number.parseInt(label, 16));

function fastPathService(s: NftService): FastPathService {
  const ips = s.backends.map(ipOfMark);
  return { vip: s.vip, port: s.port, protocol: s.protocol, table: Array.from(s.slots, (i) => ips[i]!) };
}

/**
 * Plans from one desired state to the next, reusing what did not change: toNft's cache keeps an
 * unchanged service's table (the same object), and so does this, so telling whether the plan
 * changed compares objects, not millions of slots.
 */
export class FastPathPlanner {
  readonly #rendered: NftRenderCache = new Map();
  readonly #mapped = new WeakMap<NftService, FastPathService>();
  #last: FastPathPlan = { services: [], backends: [] };

  /** The plan for `desired`: the last one's object when nothing in it changed. */
  plan(desired: VirtualService[]): FastPathPlan {
    const dsr = desired.filter((s) => s.forwarding === "dsr");
    const services = toNft(
      // A source range's firewall, a handover's relay and affinity are the kernel path's alone.
      dsr.filter((s) => s.sourceRanges === undefined && s.handover === undefined && s.affinity === undefined),
      this.#rendered,
    )
      .filter((s) => s.slots.length > 0)
      .map((s) => {
        let mapped = this.#mapped.get(s);
        if (!mapped) this.#mapped.set(s, (mapped = fastPathService(s)));
        return mapped;
      });
    const backends = [...new Set(dsr.flatMap((s) => s.backends.map((b) => b.ip)))].sort(compareKeys);
    const last = this.#last;
    const changed =
      services.length !== last.services.length ||
      services.some((s, i) => s !== last.services[i]) ||
      backends.join() !== last.backends.join();
    // Unchanged: the same object as before, so a holder can tell by identity what it already has.
    if (changed) this.#last = { services, backends };
    return this.#last;
  }
}

/** The services a plan carries, by key (serviceKey). */
export function plannedKeys(plan: FastPathPlan): Set<string> {
  return new Set(plan.services.map(serviceKey));
}
