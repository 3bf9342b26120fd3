// A data plane for tests of what drives it (the reconciler): it takes every apply, finds no drift,
// and verifies nothing, so no VIP is ever announced through it.
import type { VerifyReport } from "../drift.ts";
import type { DataPlaneEngine } from "../engine.ts";
import type { LocalVips } from "../localVips.ts";
import type { VirtualService } from "../model.ts";

const nothingFound: VerifyReport = { drift: [], repaired: 0, rebuilt: false, full: false, durationMs: 0 };

export function idleEngine(onApply: (desired: VirtualService[]) => void = () => undefined): DataPlaneEngine {
  return {
    name: "nftables",
    apply: (desired) => {
      onApply(desired);
      return Promise.resolve({ changes: 0, drift: [] });
    },
    inspect: () => Promise.resolve({ mode: "quick", drift: [], durationMs: 0 }),
    repair: () => Promise.resolve(nothingFound),
    verify: () => Promise.resolve(nothingFound),
    verified: () => new Set(),
    fullReadMs: () => undefined,
    fullReadAffordable: () => true,
    watch: () => undefined,
    unwatch: () => undefined,
    services: () => Promise.resolve(0),
    counters: () => Promise.resolve([]),
  };
}

export function idleLocalVips(): LocalVips {
  return {
    apply: () => Promise.resolve(0),
    verify: () => Promise.resolve({ ...nothingFound, full: true }),
    verified: () => new Set<string>(),
  } as unknown as LocalVips;
}
