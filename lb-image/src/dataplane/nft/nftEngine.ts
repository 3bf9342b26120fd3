// nftables through nft: `list table` read line by line, one atomic `-f -` transaction per change (split
// by service only for changes of thousands of services, see SERVICES_PER_TRANSACTION).
//
// Reading back costs: nft 1.0.6 loads every rule and every backend table of the table for any
// listing of a chain or rule (measured: 2.3 s and 270 MB of nft at 1,000 services × 10 endpoints,
// 32 s and 2.6 GB at 10,000), while the dispatch map, the chain list and a check-only transaction
// (`nft -c`) need none of that (0.02-0.2 s). So the cheap check reads those three: the map's
// elements, every chain and base-chain hook, and, by deleting them in a transaction that is never
// committed, that every rule of ours the last full read saw (by handle) is still there unchanged
// (nftables never edits a rule in place: a replaced rule gets a new handle).
import { driftOf, type Drift, type VerifyReport } from "../drift.ts";
import { LbTunnels } from "../dsr/lbTunnels.ts";
import { SourceRangeFirewall } from "../firewall/sourceRangeFirewall.ts";
import { DiffEngine, type ApplyResult, type Inspection, type KernelRead } from "../engine.ts";
import { CommandError, run, runLines } from "../exec.ts";
import { parseServiceKey, serviceKey, type VipCounter, type VirtualService } from "../model.ts";
import { routesDue, type RouteWatch } from "../routeWatch.ts";
import { NFT_MONITOR_MAX_SLOTS, NftMonitor } from "./nftMonitor.ts";
import { NftTableParser, parseChainList, parseNftText, type DispatchEntry } from "./nftParse.ts";
import {
  BASE_CHAINS,
  baseChainListed,
  batches,
  dispatchKey,
  dispatchMap,
  rebuild as rebuildTable,
  serviceChanges,
  serviceStatements,
} from "./nftRuleset.ts";
import { NFT_TABLE, objectId, toNft, type NftRenderCache, type NftService } from "./nftState.ts";

const T = `ip ${NFT_TABLE}`;
const missingTable = (err: unknown) =>
  err instanceof CommandError && /No such file or directory/.test(err.stderr);

/**
 * Lookup slots (summed over services) up to which scheduled full reads run. nft 1.0.6 holds ~1 KB
 * per slot while it lists the table (270 MB at 1,000 services x 10 endpoints, 2.6 GB at 10,000),
 * and its memory counts in the controller's container (512 MiB): past this, a periodic full read
 * could get the container killed, so only the cheap check (the map, the chains and every rule
 * handle) runs on schedule. ~150 MB of nft at most.
 */
export const NFT_FULL_READ_MAX_SLOTS = 150_000;

/**
 * How often cheap checks also read the DSR tunnels back (7 `ip` reads in one run, ~30 ms) while no
 * `ip monitor` tells of their changes (routeWatch.ts): often enough that one deleted by someone
 * else is back within the 2 s drift target, whatever the table's size.
 */
export const TUNNEL_CHECK_MS = 1_000;

/**
 * While the monitor listens (it reports every foreign commit at once, and a restarted monitor asks
 * for a full read), the scheduled nft read-backs are only its safety net, as slow as the route
 * watch's (routeWatch.ts): a full read every NFT_WATCHED_READ_MS after a clean look, and no cheap
 * check in between (one nft process where the cheap check takes three; the monitor runs only on
 * tables small enough for that, NFT_MONITOR_MAX_SLOTS). Unwatched: every 0.5 s and 1 s. Idle with
 * one DSR service (idleController.test): 4 nft runs in 12 s at the former 5 s and 10 s.
 */
export const NFT_WATCHED_READ_MS = 30_000;

export class NftEngine extends DiffEngine<NftService> {
  readonly name = "nftables";
  /** The command, possibly behind a prefix such as `ip netns exec NS` (tests). */
  private readonly nft: [string, ...string[]];
  private readonly rendered: NftRenderCache = new Map();
  /** Chain → handles of its rules, as the last full read found them; dropped when we change the chain. */
  private handles = new Map<string, number[]>();
  /** Process ids of our latest nft writes, which the monitor must not take for someone else's. */
  private readonly ownPids: number[] = [];
  private monitor: NftMonitor | undefined;
  /** News of the namespace's route changes, while watched: when the tunnels need a read-back. */
  private routes: RouteWatch | undefined;
  private slots = 0;
  private readonly tunnels: LbTunnels;
  /**
   * The DSR backends (and handover peers) last applied; undefined before the first apply (the
   * tunnels are read then).
   */
  private tunnelTargets: { backends: Set<string>; peers: Set<string> } | undefined;
  /** When the tunnels were last read back (performance.now()). */
  private tunnelsReadAt = -Infinity;
  /** When the table was last fully read, and last given the cheap check, finding it as applied (performance.now()). */
  private fullReadAt = -Infinity;
  private checkedAt = -Infinity;

  constructor(nft: [string, ...string[]] = ["nft"], ip: [string, ...string[]] = ["ip"]) {
    super(new SourceRangeFirewall(nft, (pid) => this.ownWrite(pid)));
    this.nft = nft;
    this.tunnels = new LbTunnels(ip);
  }

  /**
   * DSR services also need their backends' tunnels (and a handover's, to its peers): a new
   * backend's before the table marks flows toward it, and a gone backend's kept until the table no
   * longer does. Each costs a read of the
   * namespace's links, rules and routes, so only when the backend set changes (or, at the first
   * apply, to adopt or clear what is there); drift between changes is the scheduled checks' to repair.
   */
  override async apply(desired: VirtualService[]): Promise<ApplyResult> {
    const dsr = desired.filter((s) => s.forwarding === "dsr");
    const backends = new Set(dsr.flatMap((s) => s.backends.map((b) => b.ip)));
    const peers = new Set(dsr.flatMap((s) => s.handover?.to ?? []));
    const before = this.tunnelTargets;
    const grows = (now: Set<string>, was: Set<string> | undefined) => [...now].some((b) => !was?.has(b));
    if (before === undefined || grows(backends, before.backends) || grows(peers, before.peers)) {
      await this.tunnels.apply(
        new Set([...(before?.backends ?? []), ...backends]),
        new Set([...(before?.peers ?? []), ...peers]),
      );
      this.tunnelsReadAt = performance.now();
    }
    const result = await super.apply(desired);
    if (before !== undefined && (grows(before.backends, backends) || grows(before.peers, peers)))
      await this.tunnels.apply(backends, peers);
    this.tunnelTargets = { backends, peers };
    return result;
  }

  /**
   * The tables' repair, and on scheduled checks the tunnels' too (read back and repaired): while
   * the route watch listens, when it heard of a change since their last read (or its safety net's
   * time came); else at most every TUNNEL_CHECK_MS on cheap checks, and on every full read. Both a
   * scheduled check (inspect beside the writer, then repair in it) and verify() come through here.
   */
  override async repair(inspection: Inspection): Promise<VerifyReport> {
    const report = await super.repair(inspection);
    const targets = this.tunnelTargets;
    const now = performance.now();
    if (inspection.mode === "changed" || !targets || targets.backends.size + targets.peers.size === 0)
      return report;
    if (!routesDue(this.routes, this.tunnelsReadAt, inspection.mode === "quick" ? TUNNEL_CHECK_MS : 0, now))
      return report;
    this.tunnelsReadAt = now;
    let repairs: string[];
    try {
      repairs = await this.tunnels.apply(targets.backends, targets.peers);
    } catch (err) {
      this.tunnelsReadAt = -Infinity; // read again at the next check, watched or not
      throw err;
    }
    return {
      ...report,
      drift: [
        ...report.drift,
        ...repairs.map((c) => driftOf("route", `dsr tunnels: repaired by \`ip ${c}\``)),
      ],
      repaired: report.repaired + repairs.length,
    };
  }

  override watch(onForeignChange: () => void, routes?: RouteWatch): void {
    this.unwatch();
    this.routes = routes;
    this.monitor = new NftMonitor({
      nft: this.nft,
      isOwn: (pid) => this.ownPids.includes(pid),
      onForeignChange,
    });
    this.onApplied();
  }
  protected override watched(): boolean {
    return this.monitor?.live ?? false;
  }
  override unwatch(): void {
    this.monitor?.stop();
    this.monitor = undefined;
    this.routes = undefined;
  }
  override fullReadAffordable(): boolean {
    if (this.monitor?.live && performance.now() - this.fullReadAt < NFT_WATCHED_READ_MS) return false;
    return this.slots <= NFT_FULL_READ_MAX_SLOTS;
  }
  /** The monitor runs while the table is small enough for its copy of it (NFT_MONITOR_MAX_SLOTS). */
  protected override onApplied(state?: NftService[]): void {
    if (state) this.slots = state.reduce((n, s) => n + s.slots.length, 0);
    if (this.slots <= NFT_MONITOR_MAX_SLOTS) this.monitor?.start();
    else this.monitor?.stop();
  }

  protected async read(timeoutMs?: number): Promise<KernelRead<NftService[]>> {
    const started = performance.now();
    // Until this read finds the table clean, the checks do not rest on earlier ones.
    this.fullReadAt = this.checkedAt = -Infinity;
    const parser = new NftTableParser();
    try {
      // -a: rule handles (for the cheap check); -n: numbers, not names from /etc/services;
      // -s: no counters (not part of the state).
      // Niced: at 1,000 services nft spends seconds of CPU listing, beside the changes being applied.
      await runLines(
        [...this.nft, "-a", "-n", "-s", "list", "table", "ip", NFT_TABLE],
        (l) => parser.line(l),
        timeoutMs,
        10,
      );
    } catch (err) {
      if (!missingTable(err)) throw err;
      this.handles = new Map();
      return { state: [], drift: [driftOf("missing", `nft: table ${T} is missing`)] };
    }
    const { services, drift, ruleHandles } = parser.result();
    this.handles = ruleHandles;
    if (drift.length === 0) this.fullReadAt = started;
    return { state: services, drift };
  }
  protected render(desired: VirtualService[]): NftService[] {
    return toNft(desired, this.rendered);
  }
  protected diff(current: NftService[], desired: NftService[]) {
    const changes = serviceChanges(current, desired);
    return { scripts: batches(changes), count: changes.reduce((n, c) => n + c.statements, 0) };
  }
  protected rebuild(desired: NftService[]) {
    // The frame (table, maps, base chains with their rules) and each service's statements.
    const frame = 2 + 1 + 4 + BASE_CHAINS.reduce((n, c) => n + 1 + c.rules.length, 0);
    return {
      scripts: rebuildTable(desired),
      count: desired.reduce((n, s) => n + serviceStatements(s), frame),
    };
  }
  protected async write(script: string): Promise<void> {
    await run([...this.nft, "-f", "-"], script, undefined, (pid) => this.ownWrite(pid));
  }
  private ownWrite(pid: number): void {
    this.ownPids.push(pid);
    if (this.ownPids.length > 64) this.ownPids.shift();
  }
  protected changed(current: NftService[], desired: NftService[]): string[] {
    return serviceChanges(current, desired).map((c) => c.key);
  }
  protected override forget(keys: Iterable<string> | "all"): void {
    if (keys === "all") this.handles = new Map();
    else for (const key of keys) this.handles.delete(`svc_${objectId(parseServiceKey(key))}`);
  }

  protected async check(
    applied: NftService[],
    mode: "changed" | "quick",
    changed: ReadonlySet<string>,
  ): Promise<Drift[]> {
    if (mode === "changed") return this.checkChanged(applied, changed);
    const now = performance.now();
    if (this.monitor?.live && now - Math.max(this.checkedAt, this.fullReadAt) < NFT_WATCHED_READ_MS)
      return [];
    this.checkedAt = -Infinity;
    const drift = await this.checkAll(applied);
    // Only a clean look counts: after a failed or drifted one, the next check looks again.
    if (drift.length === 0) this.checkedAt = now;
    return drift;
  }

  /**
   * After an apply, one nft run that commits nothing and lists nothing: the frame's rules by handle,
   * and each changed service's map element and chain, deleted in a check-only transaction (which
   * fails on what is missing). Cheap at any size: nft loads no rule, element or chain it does not
   * name. The frame's hooks and everything else are the periodic checks' part.
   */
  private async checkChanged(applied: NftService[], changed: ReadonlySet<string>): Promise<Drift[]> {
    const script = [
      ...this.ruleChecks(false),
      ...applied
        .filter((s) => changed.has(serviceKey(s)))
        .flatMap((s) => [
          `delete element ${T} ${dispatchMap(s)} { ${dispatchKey(s)} }`,
          `delete chain ${T} svc_${objectId(s)}`,
        ]),
    ];
    if (script.length === 0) return [];
    try {
      await run([...this.nft, "-c", "-f", "-"], script.map((l) => `${l}\n`).join(""));
    } catch (err) {
      if (!(err instanceof CommandError)) throw err;
      return [this.checkFailure(err)];
    }
    return [];
  }

  /** Everything a cheap read shows: every map element and where it goes, the chains, every rule of ours by handle. */
  private async checkAll(applied: NftService[]): Promise<Drift[]> {
    let listing: string;
    let dsrListing: string;
    try {
      // The services map and the chains in one nft run: on a small table, starting nft is most of
      // the cost. (Not with the rule check below: listing map elements and deleting rules in one
      // run makes nft load every rule and backend table, 2.7 s instead of 0.1 s at 1,000 services.)
      // The DSR map in a run of its own: nft 1.0.6 fails a second `list map` in one run.
      listing = await run([...this.nft, "-n", "-s", "-f", "-"], `list map ${T} services\nlist chains ip\n`);
      dsrListing = await run([...this.nft, "-n", "-s", "list", "map", "ip", NFT_TABLE, "dsr_services"]);
    } catch (err) {
      if (missingTable(err)) return [driftOf("missing", `nft: table ${T} is missing`)];
      throw err;
    }
    // The map's listing ends with the first line that closes a table.
    const cut = listing.indexOf("\n}\n") + "\n}\n".length;
    const drift: Drift[] = [];
    const entries: DispatchEntry[] = [];
    for (const map of [listing.slice(0, cut), dsrListing]) {
      const parsed = parseNftText(map).dispatch();
      entries.push(...parsed.entries);
      drift.push(...parsed.drift);
    }
    // Every applied service has its element going to its chain in its map, and nothing else is there.
    const where = (s: Pick<NftService, "forwarding">, chain: string) => `${dispatchMap(s)} ${chain}`;
    const want = new Map(applied.map((s) => [serviceKey(s), where(s, `svc_${objectId(s)}`)]));
    const have = new Map(entries.map((e) => [serviceKey(e.service), where(e.service, e.chain)]));
    for (const [key, chain] of want)
      if (have.get(key) !== chain)
        drift.push(driftOf("service", `nft: dispatch element of ${key} is missing`, key));
    for (const key of have.keys())
      if (!want.has(key)) drift.push(driftOf("foreign", `nft: dispatch element ${key} was not applied`));
    drift.push(...this.chainDrift(applied, listing.slice(cut)));
    if (drift.length > 0) return drift;
    const rules = this.ruleChecks(true);
    if (rules.length === 0) return [];
    try {
      await run([...this.nft, "-c", "-f", "-"], rules.map((l) => `${l}\n`).join(""));
    } catch (err) {
      if (!(err instanceof CommandError)) throw err;
      return [this.checkFailure(err)];
    }
    return [];
  }

  /**
   * The rules the last full read saw, as deletions for a check-only transaction (nftables never
   * edits a rule in place: a replaced rule has a new handle). The frame's always; every service's
   * too when `all`. Services changed since have no known handle: their transaction committed whole.
   */
  private ruleChecks(all: boolean): string[] {
    return [...this.handles]
      .filter(([chain]) => all || BASE_CHAINS.some((c) => c.name === chain))
      .flatMap(([chain, handles]) => handles.map((h) => `delete rule ${T} ${chain} handle ${h}`));
  }

  /** What a failed check-only transaction tells (nft names the statement it failed on). */
  private checkFailure(err: CommandError): Drift {
    const first = err.stderr.trim().split("\n")[0] ?? "";
    if (/^delete rule/m.test(err.stderr))
      return driftOf("base", `nft: a rule of ours is gone or replaced: ${first}`);
    if (/^delete (element|chain)/m.test(err.stderr))
      return driftOf("service", `nft: a service's element or chain is missing: ${first}`);
    if (missingTable(err)) return driftOf("missing", `nft: table ${T} is missing`);
    return driftOf("unparseable", `nft: the check failed: ${first}`);
  }

  /** Exactly the base chains, with their hooks, and one chain per service, in `nft list chains ip`. */
  private chainDrift(applied: NftService[], listing: string): Drift[] {
    const chains = parseChainList(listing);
    const expected = new Map<string, string>([
      ...BASE_CHAINS.map((c) => [c.name, baseChainListed(c)] as const),
      ...applied.map((s) => [`svc_${objectId(s)}`, ""] as const),
    ]);
    const drift: Drift[] = [];
    for (const [chain, header] of expected)
      if (chains.get(chain) !== header)
        drift.push(driftOf("base", `nft: chain ${chain} is missing or changed`));
    for (const chain of chains.keys())
      if (!expected.has(chain)) drift.push(driftOf("foreign", `nft: foreign chain ${chain}`));
    return drift;
  }

  async counters(): Promise<VipCounter[]> {
    // One map per nft run: nft 1.0.6 fails a second `list map` in one run.
    const maps = await Promise.all(
      ["services", "dsr_services"].map((map) =>
        run([...this.nft, "-n", "list", "map", "ip", NFT_TABLE, map]),
      ),
    );
    return maps.flatMap((map) => parseNftText(map).counters());
  }
}
