// nftables through nft: `-j list table` to read, one atomic `-f -` transaction per change (split
// by service only for changes of thousands of services, see SERVICES_PER_TRANSACTION).
import { DiffEngine } from "../engine.ts";
import { CommandError, run } from "../exec.ts";
import type { VipCounter, VirtualService } from "../model.ts";
import { parseNftCounters, parseNftTable } from "./nftParse.ts";
import { batches, skeleton, transactionGroups } from "./nftRuleset.ts";
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
    try {
      return parseNftTable(await run([...this.nft, "-j", "list", "table", "ip", NFT_TABLE]));
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
    const groups = transactionGroups(current, desired);
    return { scripts: batches(groups), count: groups.join("").split("\n").filter(Boolean).length };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.nft, "-f", "-"], script);
  }
  protected count(state: NftService[]): number {
    return state.length;
  }
  async counters(): Promise<VipCounter[]> {
    return parseNftCounters(await run([...this.nft, "-j", "list", "map", "ip", NFT_TABLE, "services"]));
  }
}
