import fc from "fast-check";
import { toIpvs } from "./ipvs/ipvsState.ts";
import { serviceKey, type VirtualService } from "./model.ts";
import { markLabel, toNft } from "./nft/nftState.ts";
import { arbitraryState } from "./testing/arbitraries.ts";

const withoutHandover = (state: VirtualService[]) => state.map(({ handover: _, ...s }) => s);

describe("IPVS and nftables engines", () => {
  it("describe the same mapping: per VIP:port, the same backends take new flows", () => {
    fc.assert(
      // A handover's relay is the nftables engine's alone (the IPVS engine refuses it).
      fc.property(arbitraryState.map(withoutHandover), (desired) => {
        const dsr = new Set(desired.filter((s) => s.forwarding === "dsr").map(serviceKey));
        const ipvs = new Map(
          toIpvs(desired).map((s) => [
            serviceKey(s),
            s.servers
              .filter((r) => r.weight > 0)
              // A DSR backend is its pod, named by its mark (its port is the service's).
              .map((r) => (dsr.has(serviceKey(s)) ? markLabel(r.ip) : `${r.ip} . ${r.port}`))
              .sort(),
          ]),
        );
        const nft = new Map(toNft(desired).map((s) => [serviceKey(s), [...s.backends].sort()]));
        expect(nft).toEqual(ipvs);
      }),
      { numRuns: 300 },
    );
  });
});
