// Which live LB pod owns which VIP on AWS, where a route table holds one target per destination.
// Rendezvous (highest-random-weight) hashing: every pod computes the same owner from the same member
// list, VIPs spread evenly over the members, and a member joining or leaving moves only the VIPs it
// gains or held (no global reshuffle as with modulo hashing).
import { createHash } from "node:crypto";

function weight(vip: string, member: string): bigint {
  return createHash("sha256").update(`${vip}\0${member}`).digest().readBigUInt64BE(0);
}

/** The member owning `vip`, or undefined when there is none. */
export function ownerOf(vip: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = -1n;
  for (const m of members) {
    const w = weight(vip, m);
    // Ties (practically impossible with 64 bits) go to the smaller name, so every pod agrees.
    if (w > bestWeight || (w === bestWeight && best !== undefined && m < best)) {
      best = m;
      bestWeight = w;
    }
  }
  return best;
}

/** VIP -> owner for every VIP (none when there are no members). */
export function assignOwners(vips: readonly string[], members: readonly string[]): Map<string, string> {
  const owners = new Map<string, string>();
  for (const vip of vips) {
    const owner = ownerOf(vip, members);
    if (owner !== undefined) owners.set(vip, owner);
  }
  return owners;
}
