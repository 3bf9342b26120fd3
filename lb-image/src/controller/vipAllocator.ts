// VIP allocation as a pure function of the Services (annotations, status, age): which Service gets
// which address. Only the elected allocator runs it and records the result in
// status.loadBalancer.ingress, so allocations survive restarts and no two LB pods hand out the
// same address. The rules, in order of precedence:
//  1. An address recorded in a Service's status stays with it while the Service still wants it:
//     no other Service's request or age takes it. If two statuses hold one address (written
//     outside this allocator), the oldest Service keeps it and the other is told.
//  2. A request (REQUESTED_VIPS_ANNOTATION) is met as a whole or not at all: while any requested
//     address is another Service's, or invalid, the request waits with a Warning and the Service
//     keeps what it has, so a typo or a clash never takes a working address away.
//  3. A Service that asked for nothing keeps what it has; with nothing, it gets the lowest free
//     address of its pool (VIP_POOL_ANNOTATION) or of the first pool with room that auto-assigns,
//     never one that some Service requests. Changing the pool annotation moves it into that pool
//     when it has room.
// The result is a fixed point: run again on the statuses it produced, it changes nothing.
import type { V1Service } from "@kubernetes/client-node";
import {
  REQUESTED_VIPS_ANNOTATION,
  VIP_POOL_ANNOTATION,
  autoAssigns,
  isIpv4Address,
  type VipPool,
} from "@portable-lb/core/config";
import { refOf, statusVips, type SkippedItem } from "./desiredState.ts";
import { PoolAddresses } from "./poolAddresses.ts";
import { ingressAsWritten } from "./statusWriter.ts";

/** The Normal Event to send once an allocation that differs from the status is written. */
export interface VipChange {
  reason: "VipAllocated" | "VipChanged" | "VipStatusRepaired";
  message: string;
}

export interface Allocation {
  /** namespace/name */
  service: string;
  vips: string[];
  /** Present exactly when the Service's status must be written: its VIPs differ, or its form. */
  change?: VipChange;
}

export interface AllocationResult {
  /** One per Service, oldest first. */
  allocations: Allocation[];
  problems: SkippedItem[];
}

/** One Service as the allocator sees it. */
interface Claim {
  svc: V1Service;
  key: string;
  /** The addresses in its status, as written there. */
  recorded: string[];
  /** What it has at this point of the run. */
  held: string[];
  /** Why `held` differs from `recorded` (the last change made). */
  why?: string;
  /** The addresses it requests, when it requests any. */
  request?: string[];
  /** What is wrong with the request; a request with faults waits. */
  requestFaults: { reason: string; message: string }[];
  pool?: string;
}

const list = (ips: string[]) => (ips.length ? ips.join(", ") : "none");
const sameSet = (a: string[], b: string[]) => a.length === b.length && a.every((ip) => b.includes(ip));

function claimOf(svc: V1Service, addresses: PoolAddresses): Claim {
  const recorded = statusVips(svc);
  const asked = [
    ...new Set(
      (svc.metadata?.annotations?.[REQUESTED_VIPS_ANNOTATION] ?? "").split(",").map((s) => s.trim()),
    ),
  ].filter(Boolean);
  const requestFaults: Claim["requestFaults"] = [];
  for (const ip of asked) {
    if (!isIpv4Address(ip))
      requestFaults.push({
        reason: "InvalidVip",
        message: `requested VIP ${JSON.stringify(ip)} is not an IPv4 address; fix ${REQUESTED_VIPS_ANNOTATION}`,
      });
    else if (!addresses.poolOf(ip))
      requestFaults.push({
        reason: "VipOutsidePools",
        message: `requested VIP ${ip} is outside every pool (${addresses.pools.map((p) => `${p.name} ${p.cidr}`).join(", ")}${addresses.pools.some((p) => p.avoidBuggyIps) ? "; .0 and .255 are left out where a pool avoids them" : ""}); pick one inside a pool or drop the request`,
      });
  }
  const pool = svc.metadata?.annotations?.[VIP_POOL_ANNOTATION];
  return {
    svc,
    key: refOf(svc).object,
    recorded,
    held: [],
    ...(asked.length && { request: asked }),
    requestFaults,
    ...(pool !== undefined && { pool }),
  };
}

/**
 * Oldest first, then by name: who keeps an address two statuses hold, and who wins a free address
 * two Services request at once. Computed once per Service, not per comparison.
 */
function byAge(claims: Claim[]): Claim[] {
  return claims
    .map((c) => {
      const created = c.svc.metadata?.creationTimestamp;
      return { c, t: created ? new Date(created).getTime() : 0 };
    })
    .sort((a, b) => a.t - b.t || (a.c.key < b.c.key ? -1 : a.c.key > b.c.key ? 1 : 0))
    .map((x) => x.c);
}

export function allocate(services: V1Service[], pools: VipPool[]): AllocationResult {
  const addresses = new PoolAddresses(pools);
  const claims = byAge(services.map((svc) => claimOf(svc, addresses)));
  const problems: SkippedItem[] = [];
  const problem = (c: Claim, reason: string, message: string) =>
    problems.push({ ...refOf(c.svc), kind: "Service", reason, message });
  const keeps = (c: Claim) =>
    c.held.length ? `; ${c.key} keeps ${list(c.held)} meanwhile` : "; it has no address meanwhile";

  const holder = new Map<string, Claim>();
  // Requests waiting for an address another Service holds, woken when it is released.
  const waiting = new Map<string, Claim[]>();
  const woken: Claim[] = [];
  // Never handed out as a fresh address, so a waiting request is not overtaken by one.
  const requested = new Set(claims.flatMap((c) => (c.requestFaults.length ? [] : (c.request ?? []))));
  const free = (ip: string) => !holder.has(ip) && !requested.has(ip);

  const take = (c: Claim, vips: string[], why: string) => {
    const before = c.held;
    c.held = vips;
    c.why = why;
    for (const ip of vips) holder.set(ip, c);
    for (const ip of before.filter((ip) => !vips.includes(ip))) {
      holder.delete(ip);
      addresses.released(ip);
      woken.push(...(waiting.get(ip) ?? []));
      waiting.delete(ip);
    }
  };
  const blockers = (c: Claim) => c.request!.filter((ip) => (holder.get(ip) ?? c) !== c);
  /** Meets a sound request if every address in it is free or its own; else waits on the others. */
  const tryRequest = (c: Claim) => {
    if (sameSet(c.held, c.request!)) return;
    const blocked = blockers(c);
    for (const ip of blocked) waiting.set(ip, [...(waiting.get(ip) ?? []), c]);
    if (blocked.length === 0) take(c, c.request!, `the Service requests it in ${REQUESTED_VIPS_ANNOTATION}`);
  };
  const wake = () => {
    for (let c = woken.shift(); c; c = woken.shift()) tryRequest(c);
  };

  // 1. Recorded addresses stay where they are; only an address out of every pool, or one an older
  //    Service's status also holds, is dropped.
  for (const c of claims) {
    for (const ip of c.recorded) {
      const other = holder.get(ip);
      if (other === c) c.why = `the status listed ${ip} twice`;
      else if (!addresses.poolOf(ip)) c.why = `${ip} is in no VIP pool (any more)`;
      else if (other) {
        c.why = `${ip} is also recorded for the older Service ${other.key}, which keeps it`;
        problem(
          c,
          "VipDuplicate",
          `VIP ${ip} is recorded in the status of both ${other.key} and this Service (written outside portable-lb's allocator, e.g. restored from a backup); the older one, ${other.key}, keeps it and this Service gets another address`,
        );
      } else {
        holder.set(ip, c);
        c.held.push(ip);
      }
    }
  }

  // 2. Requests, oldest first; each address given back lets the requests waiting on it try again.
  for (const c of claims) {
    if (!c.request || c.requestFaults.length) continue;
    tryRequest(c);
    wake();
  }

  // 3. A fresh address for each Service that asked for none and has none, or is outside the pool
  //    it names. Rounds repeat while one gives an address back (a Service moving pools, a request
  //    met in turn), so no Service is left without one that a second run would find free.
  const poolNamed = new Map(pools.map((p) => [p.name, p]));
  const automatic = pools.filter(autoAssigns);
  let pending = claims.filter((c) => {
    if (c.request) return false;
    if (c.pool === undefined) return c.held.length === 0;
    if (!poolNamed.has(c.pool)) {
      problem(
        c,
        "UnknownPool",
        `VIP pool ${JSON.stringify(c.pool)} (${VIP_POOL_ANNOTATION}) does not exist; use one of: ${pools.map((p) => p.name).join(", ")}${keeps(c)}`,
      );
      return false;
    }
    return c.held.length === 0 || c.held.some((ip) => addresses.poolOf(ip)?.name !== c.pool);
  });
  while (pending.length) {
    const releases = addresses.releases;
    pending = pending.filter((c) => {
      const candidates = c.pool === undefined ? automatic : [poolNamed.get(c.pool)!];
      for (const pool of candidates) {
        const vip = addresses.lowestFree(pool, free);
        if (!vip) continue;
        // A Service renumbered because its address was dropped in step 1 is told that reason.
        const why = c.held.length
          ? `the Service asks for pool ${c.pool} in ${VIP_POOL_ANNOTATION}`
          : (c.why ?? `the lowest free address of pool ${pool.name}`);
        take(c, [vip], why);
        wake();
        return false;
      }
      return true;
    });
    if (addresses.releases === releases) break;
  }
  for (const c of pending)
    if (c.pool === undefined && automatic.length === 0)
      problem(
        c,
        "NoAutoAssignPool",
        `every VIP pool has autoAssign: false (${pools.map((p) => p.name).join(", ")}), so a Service that asks for no pool gets no address; name a pool in ${VIP_POOL_ANNOTATION} or request an address in ${REQUESTED_VIPS_ANNOTATION}${keeps(c)}`,
      );
    else
      problem(
        c,
        "PoolExhausted",
        `no free VIP in ${c.pool === undefined ? "any pool that auto-assigns" : `pool ${c.pool}`}; add addresses to a pool or delete unused Services${keeps(c)}`,
      );

  // 4. What each waiting request waits for.
  for (const c of claims) {
    if (!c.request) continue;
    for (const f of c.requestFaults) problem(c, f.reason, `${f.message}${keeps(c)}`);
    if (c.requestFaults.length) continue;
    for (const ip of blockers(c)) {
      const owner = holder.get(ip)!.key;
      problem(
        c,
        "VipInUse",
        `VIP ${ip} belongs to ${owner}; this request waits until ${owner} gives it up (is deleted, or requests other addresses in ${REQUESTED_VIPS_ANNOTATION}), or change this Service's request to a free address${keeps(c)}`,
      );
    }
  }

  return {
    allocations: claims.map((c) => {
      const change = changeOf(c);
      return { service: c.key, vips: c.held, ...(change && { change }) };
    }),
    problems,
  };
}

/** Why the Service's status must be written, if it must: its VIPs changed, or its form. */
function changeOf(c: Claim): VipChange | undefined {
  if (c.held.join(",") === c.recorded.join(","))
    return ingressAsWritten(c.svc, c.held)
      ? undefined
      : {
          reason: "VipStatusRepaired",
          message: `status.loadBalancer.ingress for ${list(c.held)} written back as the controller writes it (ipMode Proxy): something changed it, and with ipMode VIP kube-proxy would send the VIP's traffic past the load balancer`,
        };
  return c.recorded.length === 0
    ? { reason: "VipAllocated", message: `VIP ${list(c.held)} allocated: ${c.why}` }
    : {
        reason: "VipChanged",
        message: `VIP changed from ${list(c.recorded)} to ${list(c.held)}: ${c.why}`,
      };
}
