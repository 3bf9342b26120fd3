// VIPs accepted as local addresses in the LB pod (paper Fig. 5.5: `ip route add local VIP dev lo`),
// so IPVS sees VIP traffic on its input hook. Applied by diff, like the engines: the routes are read
// once at start (adopted) and after a failed apply, else diffed against what was last applied (with
// thousands of VIPs, listing them on every reconcile cost more than the change). Only addresses
// inside the VIP pools are ever touched, whatever else the namespace holds. verify() reads them back
// (one `ip -j route show`, cheap at any size), repairs a deleted or foreign route, and tells which
// VIPs have their route in the kernel now.
import { cidrContains, isIpv4Address } from "@portable-lb/core/config";
import { RepairError, driftOf, type Drift, type VerifyReport } from "./drift.ts";
import { run } from "./exec.ts";

interface Route {
  dst: string;
  type?: string;
}

export class LocalVips {
  private readonly ip: [string, ...string[]];
  private readonly pools: string[];
  /** The pool addresses the kernel holds as local routes; unknown before the first read. */
  private known: Set<string> | undefined;
  /** The VIPs last applied, and those of them read back since. */
  private applied: Set<string> | undefined;
  private readBack = new Set<string>();

  constructor(pools: string[], ip: [string, ...string[]] = ["ip"]) {
    this.pools = pools;
    this.ip = ip;
  }

  async current(): Promise<string[]> {
    const routes = JSON.parse(
      await run([...this.ip, "-j", "route", "show", "table", "local", "type", "local", "dev", "lo"]),
    ) as Route[];
    return routes
      .map((r) => r.dst.replace(/\/32$/, ""))
      .filter((dst) => this.pools.some((p) => isIpv4Address(dst) && cidrContains(p, dst)));
  }

  /** Makes exactly `vips` (of those in the pools) local; returns how many routes changed. */
  async apply(vips: string[]): Promise<number> {
    const have = this.known ?? new Set(await this.current());
    const want = new Set(vips);
    const commands = this.commands(have, want);
    for (const vip of [...this.readBack]) if (!want.has(vip) || !have.has(vip)) this.readBack.delete(vip);
    if (commands.length > 0) await this.send(commands);
    this.known = want;
    this.applied = want;
    return commands.length;
  }

  /** Reads the routes back, repairs any difference from the last apply, and reads them again. */
  async verify(): Promise<VerifyReport> {
    const started = performance.now();
    const want = this.applied;
    const report = (drift: Drift[], repaired: number): VerifyReport => ({
      drift,
      repaired,
      rebuilt: false,
      full: true,
      durationMs: performance.now() - started,
    });
    if (want === undefined) return report([], 0);
    const have = new Set(await this.current());
    const drift = [
      ...[...want]
        .filter((v) => !have.has(v))
        .map((v) => driftOf("route", `local route of VIP ${v} is missing`, v)),
      ...[...have]
        .filter((v) => !want.has(v))
        .map((v) => driftOf("route", `local route of ${v} was not applied`, v)),
    ];
    const commands = this.commands(have, want);
    if (commands.length > 0) {
      try {
        await this.send(commands);
        const after = new Set(await this.current());
        if (this.commands(after, want).length > 0)
          throw new Error("the local routes still differ after the repair");
      } catch (err) {
        this.known = undefined;
        this.readBack = new Set([...want].filter((v) => have.has(v)));
        throw new RepairError(
          `local VIP routes: ${err instanceof Error ? err.message : String(err)}`,
          report(drift, 0),
          {
            cause: err,
          },
        );
      }
    }
    this.known = want;
    this.readBack = new Set(want);
    return report(drift, commands.length);
  }

  /** The VIPs whose local route was read back from the kernel and not changed since. */
  verified(): ReadonlySet<string> {
    return this.readBack;
  }

  private commands(have: Set<string>, want: Set<string>): string[] {
    const commands: string[] = [];
    for (const vip of want)
      if (!have.has(vip)) commands.push(`route replace local ${vip}/32 dev lo table local`);
    for (const vip of have) if (!want.has(vip)) commands.push(`route del local ${vip}/32 dev lo table local`);
    return commands;
  }

  private async send(commands: string[]): Promise<void> {
    try {
      // One process for all: a first start with thousands of VIPs made thousands of `ip` runs.
      await run([...this.ip, "-batch", "-"], commands.map((c) => `${c}\n`).join(""));
    } catch (err) {
      this.known = undefined; // partly applied: read the kernel again next time
      throw err;
    }
  }
}
