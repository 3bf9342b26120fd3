// Pod addresses from the node's podCIDR, as CNI's host-local plugin hands them out: the gateway is the
// first address, each pod gets the next free one after the last handed out (so a just-released
// address is not reused at once while peers may still hold its ARP entry or conntrack flows), and
// the allocations are kept in one JSON file in the state folder, written whole and renamed, so a
// restarted agent knows which address belongs to which pod.
import {
  cidrContains,
  cidrRange,
  ipv4ToNumber,
  isIpv4Address,
  isIpv4Cidr,
  numberToIpv4,
} from "@portable-lb/core/config";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

export class IpamError extends Error {}

/** A strict IPv4 prefix (dotted-quad address, length 0-32), or an IpamError naming the value. */
function checkCidr(cidr: string): string {
  if (!isIpv4Cidr(cidr) || !isIpv4Address(cidr.split("/")[0])) {
    throw new IpamError(`"${cidr}" is not an IPv4 prefix`);
  }
  return cidr;
}

/** The prefix length of a pod CIDR ("10.244.1.0/24" → 24). */
export function prefixLength(cidr: string): number {
  return Number(checkCidr(cidr).split("/")[1]);
}

/** The bridge's address: the first address of the pod CIDR. */
export function gatewayOf(cidr: string): string {
  return numberToIpv4(cidrRange(checkCidr(cidr)).first + 1);
}

export interface IpamState {
  cidr: string;
  /** The address handed out last; the next search starts after it. */
  last?: string;
  /** Address → owner (a pod UID). */
  allocated: Record<string, string>;
}

/**
 * Gives `owner` an address: the one it has already, else the next free one after `last`, wrapping
 * around, never the network, gateway or broadcast address. Pure: returns the new state.
 */
export function allocate(state: IpamState, owner: string): { state: IpamState; ip: string } {
  const held = Object.entries(state.allocated).find(([, o]) => o === owner);
  if (held) return { state, ip: held[0] };
  const net = cidrRange(checkCidr(state.cidr));
  // Host addresses: after the gateway, before the broadcast address.
  const first = net.first + 2;
  const last = net.last - 1;
  if (last < first) throw new IpamError(`pod CIDR ${state.cidr} has no room for pods`);
  const count = last - first + 1;
  const previous =
    state.last !== undefined && cidrContains(state.cidr, state.last) ? ipv4ToNumber(state.last) : last;
  for (let i = 1; i <= count; i++) {
    const n = first + ((((previous - first + i) % count) + count) % count);
    const ip = numberToIpv4(n);
    if (state.allocated[ip] === undefined) {
      return { state: { ...state, last: ip, allocated: { ...state.allocated, [ip]: owner } }, ip };
    }
  }
  throw new IpamError(`pod CIDR ${state.cidr} is full (${count} addresses in use)`);
}

/** Frees every address `owner` holds. Pure. */
export function release(state: IpamState, owner: string): IpamState {
  const allocated = Object.fromEntries(Object.entries(state.allocated).filter(([, o]) => o !== owner));
  return { ...state, allocated };
}

/** The IPAM state of one node, kept in `<state>/ipam.json`. */
export class Ipam {
  readonly #file: string;
  #state: IpamState;

  /**
   * Loads the file for `cidr`. A file for another CIDR (the Node was deleted and registered again
   * with a new podCIDR) is started over: none of its addresses can be used on the new bridge.
   */
  constructor(file: string, cidr: string) {
    this.#file = file;
    const saved = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as IpamState) : undefined;
    this.#state = saved?.cidr === cidr ? saved : { cidr, allocated: {} };
    this.#save();
  }

  get cidr(): string {
    return this.#state.cidr;
  }

  /** The address `owner` holds, if any. */
  addressOf(owner: string): string | undefined {
    return Object.entries(this.#state.allocated).find(([, o]) => o === owner)?.[0];
  }

  allocate(owner: string): string {
    const { state, ip } = allocate(this.#state, owner);
    if (state !== this.#state) {
      this.#state = state;
      this.#save();
    }
    return ip;
  }

  release(owner: string): void {
    const state = release(this.#state, owner);
    if (Object.keys(state.allocated).length !== Object.keys(this.#state.allocated).length) {
      this.#state = state;
      this.#save();
    }
  }

  /** Owners holding an address, so a restarted agent can free those of pods that are gone. */
  owners(): string[] {
    return [...new Set(Object.values(this.#state.allocated))];
  }

  #save(): void {
    writeFileSync(`${this.#file}.tmp`, JSON.stringify(this.#state, null, 2));
    renameSync(`${this.#file}.tmp`, this.#file);
  }
}
