// The source-range firewall as a value, for engines over simulated tools (the IPVS engine's property
// tests): its table is the state the last write left. The real one runs in network namespaces and
// the QEMU guest (sourceRangeFirewall.test.ts, the integration tests).
import { driftOf } from "../../drift.ts";
import type { VirtualService } from "../../model.ts";
import { firewallState, sameFirewall, type FirewallState } from "../firewallTable.ts";
import type { Firewall } from "../sourceRangeFirewall.ts";

export class SimulatedFirewall implements Firewall {
  /** What the simulated kernel holds. */
  private table: FirewallState = new Map();
  private wanted: FirewallState = new Map();

  apply(services: VirtualService[]) {
    this.wanted = firewallState(services);
    const changes = sameFirewall(this.table, this.wanted) ? 0 : 1;
    this.table = this.wanted;
    return Promise.resolve({ changes, drift: [] });
  }

  check() {
    if (sameFirewall(this.table, this.wanted)) return Promise.resolve({ drift: [], repaired: 0 });
    this.table = this.wanted;
    return Promise.resolve({ drift: [driftOf("service", "the firewall's table differs")], repaired: 1 });
  }
}
