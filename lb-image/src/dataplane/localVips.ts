// VIPs accepted as local addresses in the LB pod (paper Fig. 5.5: `ip route add local VIP dev lo`),
// so IPVS sees VIP traffic on its input hook. Applied by diff; only addresses inside the VIP pools
// are ever touched, whatever else the namespace holds.
import { cidrContains, isIpv4Address } from "@portable-lb/core/config";
import { run } from "./exec.ts";

interface Route {
  dst: string;
  type?: string;
}

export class LocalVips {
  private readonly ip: [string, ...string[]];
  private readonly pools: string[];

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
    const have = new Set(await this.current());
    const want = new Set(vips);
    let changes = 0;
    for (const vip of want) {
      if (have.has(vip)) continue;
      await run([...this.ip, "route", "replace", "local", `${vip}/32`, "dev", "lo", "table", "local"]);
      changes++;
    }
    for (const vip of have) {
      if (want.has(vip)) continue;
      await run([...this.ip, "route", "del", "local", `${vip}/32`, "dev", "lo", "table", "local"]);
      changes++;
    }
    return changes;
  }
}
