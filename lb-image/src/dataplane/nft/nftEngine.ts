// nftables through nft: `-j list table` to read, one atomic `-f -` transaction per change.
import { DiffEngine } from "../engine.ts";
import { CommandError, run } from "../exec.ts";
import type { VirtualService } from "../model.ts";
import { parseNftTable } from "./nftParse.ts";
import { skeleton, transaction } from "./nftRuleset.ts";
import { NFT_TABLE, toNft, type NftService } from "./nftState.ts";

export class NftEngine extends DiffEngine<NftService[]> {
  readonly name = "nftables";
  /** The command, possibly behind a prefix such as `ip netns exec NS` (tests). */
  private readonly nft: [string, ...string[]];

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
    return toNft(desired);
  }
  protected diff(current: NftService[], desired: NftService[]) {
    const script = transaction(current, desired);
    return { script, count: script.split("\n").filter(Boolean).length };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.nft, "-f", "-"], script);
  }
  protected count(state: NftService[]): number {
    return state.length;
  }
}
