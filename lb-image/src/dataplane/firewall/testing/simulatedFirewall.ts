// The source-range firewall as a value, for engines over simulated tools (the IPVS engine's property
// tests): its table is the state the last write left, and nothing else changes it. The real one
// runs in network namespaces and the QEMU guest (sourceRangeFirewall.test.ts, the integration tests).
import type { VirtualService } from "../../model.ts";
import { firewallState, sameFirewall, type FirewallState } from "../firewallTable.ts";
import type { Firewall } from "../sourceRangeFirewall.ts";

export class SimulatedFirewall implements Firewall {
  private table: FirewallState = new Map();

  apply(services: VirtualService[]) {
    const wanted = firewallState(services);
    const changes = sameFirewall(this.table, wanted) ? 0 : 1;
    this.table = wanted;
    return Promise.resolve({ changes, drift: [] });
  }

  check(_full: boolean) {
    return Promise.resolve({ drift: [], repaired: 0 });
  }
}
