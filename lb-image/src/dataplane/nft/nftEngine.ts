// nftables through nft: `list table` read line by line, one atomic `-f -` transaction per change (split
// by service only for changes of thousands of services, see SERVICES_PER_TRANSACTION).
import { DiffEngine } from "../engine.ts";
import { CommandError, run, runLines } from "../exec.ts";
import type { VipCounter, VirtualService } from "../model.ts";
import { NftTableParser, parseNftText } from "./nftParse.ts";
import { batches, serviceChanges, skeleton } from "./nftRuleset.ts";
import { NFT_TABLE, toNft, type NftRenderCache, type NftService } from "./nftState.ts";

export class NftEngine extends DiffEngine<NftService[]> {
  readonly name = "nftables";
  /** The command, possibly behind a prefix such as `ip netns exec NS` (tests). */
  private readonly nft: [string, ...string[]];
  private readonly rendered: NftRenderCache = new Map();

  constructor(nft: [string, ...string[]] = ["nft"]) {
    super();
    this.nft = nft;
  }

  protected async read(): Promise<NftService[]> {
    const parser = new NftTableParser();
    try {
      // -n: numbers, not names from /etc/services; -s: no counters (not part of the state).
      await runLines([...this.nft, "-n", "-s", "list", "table", "ip", NFT_TABLE], (l) => parser.line(l));
      return parser.services();
    } catch (err) {
      // First start in this network namespace: make the table, with no services yet.
      if (err instanceof CommandError && /No such file or directory/.test(err.stderr)) {
        await run([...this.nft, "-f", "-"], skeleton());
        return [];
      }
      throw err;
    }
  }
  protected render(desired: VirtualService[]): NftService[] {
    return toNft(desired, this.rendered);
  }
  protected diff(current: NftService[], desired: NftService[]) {
    const changes = serviceChanges(current, desired);
    return { scripts: batches(changes), count: changes.reduce((n, c) => n + c.statements, 0) };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.nft, "-f", "-"], script);
  }
  protected count(state: NftService[]): number {
    return state.length;
  }
  async counters(): Promise<VipCounter[]> {
    return parseNftText(
      await run([...this.nft, "-n", "list", "map", "ip", NFT_TABLE, "services"]),
    ).counters();
  }
}
