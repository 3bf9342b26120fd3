import fc from "fast-check";
import { serviceKey, type VirtualService } from "../model.ts";
import { arbitraryState } from "../testing/arbitraries.ts";
import { transaction } from "./nftRuleset.ts";
import { toNft, type NftRenderCache } from "./nftState.ts";

/** A service's forwarding, backends with weights (order-free), handover and affinity, for comparing two states. */
function backendsOf(state: VirtualService[], key: string): string | undefined {
  const s = state.find((d) => serviceKey(d) === key);
  if (!s) return undefined;
  const backends = s.backends.map((b) => `${b.ip}:${b.port}/${b.weight}`).sort();
  return `${s.forwarding ?? "snat"} ${backends.join(",")} ${JSON.stringify(s.handover ?? null)} ${s.affinity ?? ""}`;
}

describe("toNft with a render cache", () => {
  it("renders what an uncached toNft renders, reusing the objects of services whose backends, handover and affinity did not change", () => {
    fc.assert(
      fc.property(arbitraryState, arbitraryState, (first, second) => {
        const cache: NftRenderCache = new Map();
        const before = toNft(first, cache);
        const after = toNft(second, cache);
        expect(after).toEqual(toNft(second));
        expect(transaction(before, after)).toBe(transaction(toNft(first), toNft(second)));
        const old = new Map(before.map((s) => [serviceKey(s), s]));
        for (const s of after) {
          const key = serviceKey(s);
          if (old.has(key) && backendsOf(first, key) === backendsOf(second, key))
            expect(s).toBe(old.get(key));
        }
        expect([...cache.keys()].sort()).toEqual(after.map(serviceKey).sort());
      }),
      { numRuns: 300 },
    );
  });
});
