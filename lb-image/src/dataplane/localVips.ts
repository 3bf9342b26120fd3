// VIPs accepted as local addresses in the LB pod (paper Fig. 5.5: `ip route add local VIP dev lo`),
// so IPVS sees VIP traffic on its input hook. Applied by diff, like the engines: the routes are read
// once at start (adopted) and after a failed apply, else diffed against what was last applied (with
// thousands of VIPs, listing them on every reconcile cost more than the change). Only addresses
// inside the VIP pools are ever touched, whatever else the namespace holds.
import { cidrContains, isIpv4Address } from "@portable-lb/core/config";
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
    const commands: string[] = [];
    for (const vip of want)
      if (!have.has(vip)) commands.push(`route replace local ${vip}/32 dev lo table local`);
    for (const vip of have) if (!want.has(vip)) commands.push(`route del local ${vip}/32 dev lo table local`);
    if (commands.length > 0) {
      try {
        // One process for all: a first start with thousands of VIPs made thousands of `ip` runs.
        await run([...this.ip, "-batch", "-"], commands.map((c) => `${c}\n`).join(""));
      } catch (err) {
        this.known = undefined; // partly applied: read the kernel again next time
        throw err;
      }
    }
    this.known = want;
    return commands.length;
  }
}
