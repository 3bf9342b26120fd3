// The VIP pools' addresses as the allocator hands them out: which pool an address belongs to, and
// each pool's lowest free address without rescanning the pool for every Service.
import {
  cidrRange,
  ipv4ToNumber,
  isIpv4Address,
  numberToIpv4,
  type Ipv4Range,
  type VipPool,
} from "@portable-lb/core/config";

export class PoolAddresses {
  readonly pools: VipPool[];
  private readonly ranges: Ipv4Range[];
  /**
   * Per pool: every address below it was refused by the caller's `free` test. Callers refuse an
   * address again until they call released() for it, which moves the cursor back to it, so one
   * allocation run scans each pool about once, however many Services it serves.
   */
  private readonly cursors: number[];
  /** How many addresses were given back; callers compare it to see whether retrying can help. */
  releases = 0;

  constructor(pools: VipPool[]) {
    this.pools = pools;
    this.ranges = pools.map((p) => cidrRange(p.cidr));
    this.cursors = this.ranges.map((r) => r.first);
  }

  /** The pool an address may be handed out from: inside its prefix and not a .0/.255 it avoids. */
  poolOf(ip: string): VipPool | undefined {
    if (!isIpv4Address(ip)) return undefined;
    const i = this.indexOf(ipv4ToNumber(ip));
    const pool = i === undefined ? undefined : this.pools[i];
    return pool && usable(pool, ip) ? pool : undefined;
  }

  /** The lowest usable address of `pool` that `free` accepts. */
  lowestFree(pool: VipPool, free: (ip: string) => boolean): string | undefined {
    const i = this.pools.indexOf(pool);
    const { last } = this.ranges[i]!;
    for (let n = this.cursors[i]!; n <= last; n++) {
      const ip = numberToIpv4(n);
      if (usable(pool, ip) && free(ip)) {
        this.cursors[i] = n;
        return ip;
      }
    }
    this.cursors[i] = last + 1;
    return undefined;
  }

  /** `ip` is free again: the next search of its pool starts there at the latest. */
  released(ip: string): void {
    this.releases++;
    if (!isIpv4Address(ip)) return;
    const n = ipv4ToNumber(ip);
    const i = this.indexOf(n);
    if (i !== undefined) this.cursors[i] = Math.min(this.cursors[i]!, n);
  }

  private indexOf(n: number): number | undefined {
    const i = this.ranges.findIndex((r) => r.first <= n && n <= r.last);
    return i < 0 ? undefined : i;
  }
}

function usable(pool: VipPool, ip: string): boolean {
  const last = Number(ip.split(".")[3]);
  return !(pool.avoidBuggyIps && (last === 0 || last === 255));
}
