// Maglev consistent hashing (Eisenbud et al., NSDI 2016): a lookup table in which every backend
// owns slots in proportion to its weight. Built only from the backend set, so every LB pod builds
// the same table, and adding or removing one backend moves few of the other backends' slots.
import { backendKey, type Backend } from "../model.ts";

/** Table sizes: primes, so every skip value walks the whole table. */
const PRIMES = [251, 1021, 4093, 16381, 65521];

/** The smallest table with at least 10 slots per backend (Maglev's disruption bound needs M ≫ N). */
export function tableSize(backends: number): number {
  return PRIMES.find((p) => p >= backends * 10) ?? PRIMES[PRIMES.length - 1]!;
}

// FNV-1a, 32 bit: stable across processes and versions (unlike a seeded runtime hash).
function fnv1a(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The lookup table: slot i holds the index (into `backends`) that serves hash i. Backends with
 * weight 0 get no slot (draining: no new flows). Empty when no backend has weight.
 */
export function maglevTable(backends: Backend[]): number[] {
  const live = backends.map((b, i) => ({ b, i })).filter(({ b }) => b.weight > 0);
  if (live.length === 0) return [];
  const size = tableSize(live.length);
  const prefs = live.map(({ b }) => {
    const key = backendKey(b);
    return {
      offset: fnv1a(key, 0x9e3779b9) % size,
      skip: (fnv1a(key, 0x85ebca6b) % (size - 1)) + 1,
      next: 0,
    };
  });
  // Weighted turns by credit: the heaviest backend claims a slot every round, a backend of weight w
  // every w_max/w rounds. Every backend starts with one credit, so each live one owns at least one
  // slot however extreme the weights (else a light backend could get none before the table fills).
  const maxWeight = Math.max(...live.map(({ b }) => b.weight));
  const credit = live.map(() => 1);
  const table = new Array<number>(size).fill(-1);
  let filled = 0;
  for (;;) {
    for (let n = 0; n < live.length; n++) {
      if (credit[n]! >= 1) {
        credit[n]! -= 1;
        const p = prefs[n]!;
        let slot = (p.offset + p.skip * p.next) % size;
        while (table[slot]! >= 0) {
          p.next++;
          slot = (p.offset + p.skip * p.next) % size;
        }
        table[slot] = live[n]!.i;
        p.next++;
        if (++filled === size) return table;
      }
      credit[n]! += live[n]!.b.weight / maxWeight;
    }
  }
}
