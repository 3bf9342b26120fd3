import fc from "fast-check";
import type { Backend } from "../model.ts";
import { maglevTable, tableSize } from "./maglev.ts";

const backends = (n: number, weight = 1): Backend[] =>
  Array.from({ length: n }, (_, i) => ({ ip: `10.244.${i >> 8}.${i & 255}`, port: 8080, weight }));

describe("maglevTable", () => {
  it("fills every slot of a prime-sized table, only with backends that have weight", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 40 }), (weights) => {
        const bs = weights.map((w, i) => ({ ip: `10.244.0.${i}`, port: 80, weight: w }));
        const table = maglevTable(bs);
        const live = weights.filter((w) => w > 0).length;
        if (live === 0) return expect(table).toEqual([]);
        expect(table).toHaveLength(tableSize(live));
        for (const i of table) expect(bs[i]!.weight).toBeGreaterThan(0);
        expect(new Set(table).size).toBe(live);
      }),
      { numRuns: 200 },
    );
  });

  it("shares slots evenly between equal backends and in proportion to weight", () => {
    const equal = maglevTable(backends(10));
    const counts = Array.from({ length: 10 }, (_, i) => equal.filter((x) => x === i).length);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    const weighted = maglevTable([...backends(1, 3), { ip: "10.244.9.9", port: 8080, weight: 1 }]);
    const heavy = weighted.filter((x) => x === 0).length / weighted.length;
    expect(heavy).toBeGreaterThan(0.7);
    expect(heavy).toBeLessThan(0.8);
  });

  it("moves few other slots when one backend leaves (consistent hashing)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 24 }), fc.nat(), (n, pick) => {
        const before = backends(n);
        const gone = pick % n;
        const after = before.filter((_, i) => i !== gone);
        const t1 = maglevTable(before).map((i) => before[i]!.ip);
        const t2 = maglevTable(after).map((i) => after[i]!.ip);
        if (t1.length !== t2.length) return; // table size changed with N: a full rebuild is expected
        const moved = t1.filter((ip, slot) => ip !== before[gone]!.ip && t2[slot] !== ip).length;
        // Maglev keeps disruption small, not zero: allow 15% of the table.
        expect(moved / t1.length).toBeLessThan(0.15);
      }),
      { numRuns: 100 },
    );
  });

  // LB pods of two releases run side by side during a rolling upgrade: they must build equal tables.
  it("gives the same table in every process and release (no random seed; pinned by snapshot)", () => {
    expect(maglevTable(backends(4)).slice(0, 12)).toEqual(maglevTable(backends(4)).slice(0, 12));
    expect(maglevTable(backends(4))).toMatchSnapshot();
  });
});
