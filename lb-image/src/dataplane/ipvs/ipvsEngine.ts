// IPVS through ipvsadm: `-Sn` to read, one `-R` batch per change.
import { DiffEngine } from "../engine.ts";
import { run } from "../exec.ts";
import type { VipCounter, VirtualService } from "../model.ts";
import { ipvsDiff } from "./ipvsDiff.ts";
import { parseSave } from "./ipvsadmSave.ts";
import { parseStats } from "./ipvsadmStats.ts";
import { toIpvs, type IpvsService } from "./ipvsState.ts";

export class IpvsEngine extends DiffEngine<IpvsService[]> {
  readonly name = "ipvs";
  /** The command, possibly behind a prefix such as `ip netns exec NS` (tests). */
  private readonly ipvsadm: [string, ...string[]];

  constructor(ipvsadm: [string, ...string[]] = ["ipvsadm"]) {
    super();
    this.ipvsadm = ipvsadm;
  }

  protected async read(): Promise<IpvsService[]> {
    return parseSave(await run([...this.ipvsadm, "-S", "-n"]));
  }
  protected render(desired: VirtualService[]): IpvsService[] {
    return toIpvs(desired);
  }
  protected diff(current: IpvsService[], desired: IpvsService[]) {
    const commands = ipvsDiff(current, desired);
    return { scripts: [commands.map((c) => `${c}\n`).join("")], count: commands.length };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.ipvsadm, "-R"], script);
  }
  protected count(state: IpvsService[]): number {
    return state.length;
  }
  async counters(): Promise<VipCounter[]> {
    return parseStats(await run([...this.ipvsadm, "-L", "-n", "--stats", "--exact"]));
  }
}
