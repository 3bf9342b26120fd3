// Keeps the source-range firewall table (firewallTable.ts) as the services ask, beside either
// engine's own state (engine.ts runs it): written only when what it must hold changes, the first
// time after reading what a previous controller left (adopted when right), and read back on the
// engines' full verifications, rewritten when someone else changed it.
import { driftOf, type Drift } from "../drift.ts";
import { CommandError, run } from "../exec.ts";
import type { VirtualService } from "../model.ts";
import {
  FIREWALL_TABLE,
  firewallScript,
  firewallState,
  parseFirewallTable,
  sameFirewall,
  type FirewallState,
} from "./firewallTable.ts";

const TABLE = `nft table ${FIREWALL_TABLE}`;

/** What an engine asks of the firewall (engine.ts). */
export interface Firewall {
  /** Makes it hold what `services` ask; the statements sent and what a first read found. */
  apply(services: VirtualService[]): Promise<{ changes: number; drift: Drift[] }>;
  /**
   * Reads it back and repairs it toward the last apply's; what differed. Not `full` (a cheap check):
   * only while some service is restricted.
   */
  check(full: boolean): Promise<{ drift: Drift[]; repaired: number }>;
}

export class SourceRangeFirewall implements Firewall {
  private readonly nft: [string, ...string[]];
  private readonly onPid: ((pid: number) => void) | undefined;
  /** What the kernel holds, as far as known; undefined: read it first. */
  private known: FirewallState | undefined;
  /** What it must hold: the last apply's. */
  private wanted: FirewallState | undefined;

  /** `onPid`: each nft run that writes (an nft monitor must not take them for someone else's). */
  constructor(nft: [string, ...string[]], onPid?: (pid: number) => void) {
    this.nft = nft;
    this.onPid = onPid;
  }

  /** Makes the table hold what `services` ask: one `nft -f` when that differs from what it holds. */
  async apply(services: VirtualService[]): Promise<{ changes: number; drift: Drift[] }> {
    const want = firewallState(services);
    this.wanted = want;
    let drift: Drift[] = [];
    // At start no table is what a first run finds, not drift.
    if (this.known === undefined) ({ state: this.known, drift } = await this.read(false));
    if (this.known && sameFirewall(this.known, want)) return { changes: 0, drift };
    await this.write(want);
    return { changes: 1, drift };
  }

  /**
   * Reads the table back and, when it differs from what the last apply asked, rewrites it. A cheap
   * check with nothing restricted reads nothing: a stray table there is the full reads' to find.
   */
  async check(full: boolean): Promise<{ drift: Drift[]; repaired: number }> {
    const wanted = this.wanted;
    if (!wanted || (!full && wanted.size === 0)) return { drift: [], repaired: 0 };
    const found = await this.read(wanted.size > 0);
    this.known = found.state;
    if (found.state && sameFirewall(found.state, wanted)) return { drift: [], repaired: 0 };
    const drift = found.drift.length
      ? found.drift
      : [driftOf("service", `${TABLE}: the services or source ranges it holds differ from what was applied`)];
    await this.write(wanted);
    const after = await this.read(false);
    if (!after.state || !sameFirewall(after.state, wanted))
      throw new Error(
        `${TABLE} still differs after the repair: ${after.drift.map((d) => d.detail).join("; ")}`,
      );
    return { drift, repaired: 1 };
  }

  /** The table as found (a missing one holds nothing; drift when `expected`), or drift when it is not ours as written. */
  private async read(expected: boolean): Promise<{ state?: FirewallState; drift: Drift[] }> {
    let json: string;
    try {
      json = await run([...this.nft, "-j", "list", "table", "ip", FIREWALL_TABLE]);
    } catch (err) {
      if (err instanceof CommandError && /No such file or directory/.test(err.stderr)) {
        return { state: new Map(), drift: expected ? [driftOf("missing", `${TABLE} is missing`)] : [] };
      }
      throw err;
    }
    const read = parseFirewallTable(json);
    return read.problem === undefined
      ? { state: read.state, drift: [] }
      : { drift: [driftOf("base", `${TABLE} is not as written: ${read.problem}`)] };
  }

  private async write(state: FirewallState): Promise<void> {
    this.known = undefined; // unknown until the write is done: a failed one leaves it to a read
    await run([...this.nft, "-f", "-"], firewallScript(state), undefined, this.onPid);
    this.known = state;
  }
}
