// IPVS through ipvsadm: `-Sn` to read, one `-R` batch per change; beside it the engine's nft table
// that masquerades its NAT-mode services (ipvsSnat.ts), and /proc/net/ip_vs for the kernel's order
// of mh servers. IPVS has no cheaper read than `-Sn` and no change notifications, so every
// verification is a full read.
import { driftOf, type Drift } from "../drift.ts";
import { DiffEngine, type KernelRead, type Scripts } from "../engine.ts";
import { CommandError, run, withPrefix } from "../exec.ts";
import { SourceRangeFirewall, type Firewall } from "../firewall/sourceRangeFirewall.ts";
import { serviceKey, type VipCounter, type VirtualService } from "../model.ts";
import { ipvsDiff } from "./ipvsDiff.ts";
import { IpvsParseError, parseSave, replaceScript } from "./ipvsadmSave.ts";
import { parseStats } from "./ipvsadmStats.ts";
import { parseServerOrder } from "./ipvsProc.ts";
import { parseSnatTable, SNAT_TABLE, snatScript, type SnatRead } from "./ipvsSnat.ts";
import { inCanonicalOrder, toIpvs, type IpvsService } from "./ipvsState.ts";

/** A service as the engine keeps it: IPVS's part and whether its nft table masquerades it. */
export interface IpvsEngineService extends IpvsService {
  snat: boolean;
  /** False when the table read back was not the table as written (it is then rewritten). */
  snatTableOk: boolean;
}

/** One write: an `ipvsadm -R` batch or an `nft -f` script. */
export interface IpvsScript {
  tool: "ipvsadm" | "nft";
  text: string;
}

export class IpvsEngine extends DiffEngine<IpvsEngineService, IpvsScript> {
  readonly name = "ipvs";
  private readonly ipvsadm: [string, ...string[]];
  private readonly nft: [string, ...string[]];
  private readonly cat: [string, ...string[]];

  /**
   * `prefix` runs the tools elsewhere, e.g. `ip netns exec NS` (tests); in the pod, none.
   * `firewall`: the source-range firewall, by default the real one there.
   */
  constructor(
    prefix: string[] = [],
    firewall: Firewall = new SourceRangeFirewall(withPrefix(prefix, "nft")),
  ) {
    super(firewall);
    this.ipvsadm = withPrefix(prefix, "ipvsadm");
    this.nft = withPrefix(prefix, "nft");
    this.cat = withPrefix(prefix, "cat");
  }

  protected async read(timeoutMs?: number): Promise<KernelRead<IpvsEngineService[]>> {
    const [save, order, snat] = await Promise.all([
      run([...this.ipvsadm, "-S", "-n"], "", timeoutMs),
      run([...this.cat, "/proc/net/ip_vs"], "", timeoutMs),
      run([...this.nft, "-j", "list", "table", "ip", SNAT_TABLE], "", timeoutMs).catch((err: unknown) => {
        // No table yet: nothing is masqueraded.
        if (err instanceof CommandError && /No such file or directory/.test(err.stderr)) return undefined;
        throw err;
      }),
    ]);
    return this.readText(save, order, snat);
  }

  /** The three reads as state, with drift for what we never make (replaced, not looped on). */
  protected readText(save: string, procOrder = "", snatJson?: string): KernelRead<IpvsEngineService[]> {
    let ipvs: IpvsService[];
    try {
      ipvs = parseSave(save);
    } catch (err) {
      // Something we never make (a firewall-mark service, say): everything is replaced.
      if (err instanceof IpvsParseError) return { state: [], drift: [driftOf("unparseable", err.message)] };
      throw err;
    }
    const order = parseServerOrder(procOrder);
    const table: SnatRead = snatJson === undefined ? { keys: new Set() } : parseSnatTable(snatJson);
    const drift: Drift[] = [];
    const state = ipvs.map((s): IpvsEngineService => {
      const key = serviceKey(s);
      const listed = order.get(key);
      return {
        ...s,
        // Read apart from -Sn: a service made between the two reads is taken as in order.
        inOrder: listed ? inCanonicalOrder(s.scheduler, listed) : true,
        snat: table.keys?.has(key) ?? false,
        snatTableOk: table.problem === undefined,
      };
    });
    const served = new Set(state.map(serviceKey));
    const stray = [...(table.keys ?? [])].filter((k) => !served.has(k));
    const problem =
      table.problem ??
      (stray.length ? `it masquerades ${stray.join(", ")}, which IPVS does not serve` : undefined);
    if (problem !== undefined) {
      for (const s of state) s.snatTableOk = false;
      // The next diff rewrites the table whole (snatTableOk) without touching IPVS; with no
      // service to carry that, a rebuild does (clearing an empty IPVS costs nothing).
      const kind = table.problem !== undefined ? "base" : "foreign";
      drift.push({
        ...driftOf(kind, `nft table ${SNAT_TABLE} is not as written: ${problem}`),
        rebuild: state.length === 0,
      });
    }
    return { state, drift };
  }

  protected render(desired: VirtualService[]): IpvsEngineService[] {
    const snat = new Set(desired.filter((s) => (s.forwarding ?? "snat") === "snat").map(serviceKey));
    return toIpvs(desired).map((s) => ({ ...s, snat: snat.has(serviceKey(s)), snatTableOk: true }));
  }

  protected diff(current: IpvsEngineService[], desired: IpvsEngineService[]): Scripts<IpvsScript> {
    const commands = ipvsDiff(current, desired);
    const ipvsadm = commands.length
      ? [{ tool: "ipvsadm" as const, text: commands.map((c) => `${c}\n`).join("") }]
      : [];
    if (!tableDiffers(current, desired)) return { scripts: ipvsadm, count: commands.length };
    const table = { tool: "nft" as const, text: snatScript(snatKeys(desired)) };
    // Masquerading starts before a service's first packet and ends after its last.
    const had = new Set(snatKeys(current));
    const adds = snatKeys(desired).some((k) => !had.has(k));
    return { scripts: adds ? [table, ...ipvsadm] : [...ipvsadm, table], count: commands.length + 1 };
  }

  protected rebuild(desired: IpvsEngineService[]): Scripts<IpvsScript> {
    const script = replaceScript(desired);
    return {
      scripts: [
        { tool: "nft", text: snatScript(snatKeys(desired)) },
        { tool: "ipvsadm", text: script },
      ],
      count: script.split("\n").length,
    };
  }

  protected async write(script: IpvsScript): Promise<void> {
    if (script.tool === "nft") await run([...this.nft, "-f", "-"], script.text);
    else await run([...this.ipvsadm, "-R"], script.text);
  }

  protected changed(current: IpvsEngineService[], desired: IpvsEngineService[]): string[] {
    const cur = new Map(current.map((s) => [serviceKey(s), s]));
    const want = new Map(desired.map((s) => [serviceKey(s), s]));
    const one = (s: IpvsEngineService | undefined) => (s ? [s] : []);
    return [...new Set([...cur.keys(), ...want.keys()])].filter(
      (k) =>
        ipvsDiff(one(cur.get(k)), one(want.get(k))).length > 0 ||
        tableDiffers(one(cur.get(k)), one(want.get(k))),
    );
  }

  protected check(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  async counters(): Promise<VipCounter[]> {
    return parseStats(await run([...this.ipvsadm, "-L", "-n", "--stats", "--exact"]));
  }
}

function snatKeys(state: IpvsEngineService[]): string[] {
  return state.filter((s) => s.snat).map(serviceKey);
}

/** Whether the nft table must be written: a service's masquerading differs, or the table is not ours. */
function tableDiffers(current: IpvsEngineService[], desired: IpvsEngineService[]): boolean {
  const cur = new Map(current.map((s) => [serviceKey(s), s]));
  const want = new Map(desired.map((s) => [serviceKey(s), s]));
  for (const c of current) if (!c.snatTableOk || (c.snat && !want.has(serviceKey(c)))) return true;
  return desired.some((w) => (cur.get(serviceKey(w))?.snat ?? false) !== w.snat);
}
