// VIP allocation as a pure function: which Service gets which address. Only the elected allocator
// runs it and records the result in status.loadBalancer.ingress, so allocations survive restarts
// and no two LB pods hand out the same address.
import type { V1Service } from "@kubernetes/client-node";
import {
  REQUESTED_VIPS_ANNOTATION,
  VIP_POOL_ANNOTATION,
  cidrRange,
  isIpv4Address,
  numberToIpv4,
  type VipPool,
} from "@portable-lb/core/config";
import type { SkippedItem } from "./desiredState.ts";

export interface Allocation {
  /** namespace/name */
  service: string;
  vips: string[];
}

export interface AllocationResult {
  allocations: Allocation[];
  problems: SkippedItem[];
}

function key(svc: V1Service): string {
  return `${svc.metadata?.namespace ?? ""}/${svc.metadata?.name ?? ""}`;
}

function usable(pool: VipPool, ip: string): boolean {
  const last = Number(ip.split(".")[3]);
  return !(pool.avoidBuggyIps && (last === 0 || last === 255));
}

/**
 * Oldest first, then by name: the order decides who keeps a contested address, the same every run.
 * Age and name are computed once per Service, not per comparison (thousands of Services per run).
 */
function byAge(services: V1Service[]): V1Service[] {
  return services
    .map((svc) => ({
      svc,
      t: svc.metadata?.creationTimestamp ? new Date(svc.metadata.creationTimestamp).getTime() : 0,
      k: key(svc),
    }))
    .sort((a, b) => a.t - b.t || (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
    .map((x) => x.svc);
}

export function allocate(services: V1Service[], pools: VipPool[]): AllocationResult {
  const taken = new Map<string, string>(); // vip -> service key
  const problems: SkippedItem[] = [];
  const problem = (svc: V1Service, reason: string, message: string) =>
    problems.push({ object: key(svc), kind: "Service", reason, message });
  const ranges = pools.map((p) => cidrRange(p.cidr));
  const poolOf = (ip: string) => {
    const n = ip.split(".").reduce((acc, octet) => acc * 256 + Number(octet), 0); // ip is valid here
    return pools.find((p, i) => ranges[i]!.first <= n && n <= ranges[i]!.last && usable(p, ip));
  };
  const ordered = byAge(services);
  // Per pool, every address below the cursor is taken or unusable (pass 2 only adds to `taken`), so
  // "lowest free first" does not rescan the pool from its start for every Service.
  const cursor = new Map<VipPool, number>();
  const result = new Map<string, string[]>();

  // Pass 1: requested addresses, then addresses already recorded in status (kept across restarts).
  for (const svc of ordered) {
    const requested = (svc.metadata?.annotations?.[REQUESTED_VIPS_ANNOTATION] ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const current = (svc.status?.loadBalancer?.ingress ?? [])
      .map((i) => i.ip)
      .filter((ip): ip is string => !!ip);
    const wanted = requested.length ? requested : current;
    const got: string[] = [];
    for (const ip of wanted) {
      if (!isIpv4Address(ip)) {
        problem(svc, "InvalidVip", `requested VIP ${JSON.stringify(ip)} is not an IPv4 address`);
      } else if (!poolOf(ip)) {
        problem(
          svc,
          "VipOutsidePools",
          `VIP ${ip} is outside every pool (${pools.map((p) => `${p.name} ${p.cidr}`).join(", ")}); pick one inside a pool or drop the request`,
        );
      } else if (taken.has(ip)) {
        problem(
          svc,
          "VipInUse",
          `VIP ${ip} is already used by ${taken.get(ip)}; pick another or drop the request`,
        );
      } else {
        taken.set(ip, key(svc));
        got.push(ip);
      }
    }
    // A request that cannot be met gets no address rather than a different one: the user asked for that one.
    if (got.length || requested.length) result.set(key(svc), got);
  }

  // Pass 2: a fresh address for each Service that has none, lowest free first.
  for (const svc of ordered) {
    if (result.has(key(svc))) continue;
    const wantPool = svc.metadata?.annotations?.[VIP_POOL_ANNOTATION];
    const candidates = wantPool ? pools.filter((p) => p.name === wantPool) : pools;
    if (wantPool && candidates.length === 0) {
      problem(
        svc,
        "UnknownPool",
        `VIP pool ${JSON.stringify(wantPool)} does not exist; use one of: ${pools.map((p) => p.name).join(", ")}`,
      );
      continue;
    }
    let vip: string | undefined;
    for (const pool of candidates) {
      const { first, last } = ranges[pools.indexOf(pool)]!;
      let n = cursor.get(pool) ?? first;
      for (; n <= last && !vip; n++) {
        const ip = numberToIpv4(n);
        if (!taken.has(ip) && usable(pool, ip)) vip = ip;
      }
      cursor.set(pool, n);
      if (vip) break;
    }
    if (!vip) {
      problem(
        svc,
        "PoolExhausted",
        `no free VIP in ${wantPool ? `pool ${wantPool}` : "any pool"}; add addresses to a pool or delete unused Services`,
      );
      continue;
    }
    taken.set(vip, key(svc));
    result.set(key(svc), [vip]);
  }
  return {
    allocations: [...result].map(([service, vips]) => ({ service, vips })),
    problems,
  };
}
