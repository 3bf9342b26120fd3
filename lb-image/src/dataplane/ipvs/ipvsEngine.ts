// IPVS through ipvsadm: `-Sn` to read, one `-R` batch per change. IPVS has no cheaper read than
// `-Sn` and no change notifications, so every verification is a full read.
import { driftOf } from "../drift.ts";
import { DiffEngine, type KernelRead } from "../engine.ts";
import { run } from "../exec.ts";
import { serviceKey, type VipCounter, type VirtualService } from "../model.ts";
import { ipvsDiff } from "./ipvsDiff.ts";
import { IpvsParseError, parseSave, replaceScript } from "./ipvsadmSave.ts";
import { parseStats } from "./ipvsadmStats.ts";
import { toIpvs, type IpvsService } from "./ipvsState.ts";

export class IpvsEngine extends DiffEngine<IpvsService> {
  readonly name = "ipvs";
  /** The command, possibly behind a prefix such as `ip netns exec NS` (tests). */
  private readonly ipvsadm: [string, ...string[]];

  constructor(ipvsadm: [string, ...string[]] = ["ipvsadm"]) {
    super();
    this.ipvsadm = ipvsadm;
  }

  protected async read(timeoutMs?: number): Promise<KernelRead<IpvsService[]>> {
    return this.readText(await run([...this.ipvsadm, "-S", "-n"], "", timeoutMs));
  }
  /** `-Sn` output as state, or as drift when it holds what we never make. */
  protected readText(text: string): KernelRead<IpvsService[]> {
    try {
      return { state: parseSave(text), drift: [] };
    } catch (err) {
      // Something we never make (a firewall-mark service, say): replaced, not looped on.
      if (err instanceof IpvsParseError) return { state: [], drift: [driftOf("unparseable", err.message)] };
      throw err;
    }
  }
  protected render(desired: VirtualService[]): IpvsService[] {
    return toIpvs(desired);
  }
  protected diff(current: IpvsService[], desired: IpvsService[]) {
    const commands = ipvsDiff(current, desired);
    return { scripts: [commands.map((c) => `${c}\n`).join("")], count: commands.length };
  }
  protected rebuild(desired: IpvsService[]) {
    const script = replaceScript(desired);
    return { scripts: [script], count: script.split("\n").length - 1 };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.ipvsadm, "-R"], script);
  }
  protected changed(current: IpvsService[], desired: IpvsService[]): string[] {
    const cur = new Map(current.map((s) => [serviceKey(s), s]));
    const want = new Map(desired.map((s) => [serviceKey(s), s]));
    const one = (s: IpvsService | undefined) => (s ? [s] : []);
    return [...new Set([...cur.keys(), ...want.keys()])].filter(
      (k) => ipvsDiff(one(cur.get(k)), one(want.get(k))).length > 0,
    );
  }
  protected check(): Promise<undefined> {
    return Promise.resolve(undefined);
  }
  async counters(): Promise<VipCounter[]> {
    return parseStats(await run([...this.ipvsadm, "-L", "-n", "--stats", "--exact"]));
  }
}
