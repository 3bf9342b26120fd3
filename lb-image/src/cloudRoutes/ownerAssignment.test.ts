import fc from "fast-check";
import { assignOwners, ownerOf } from "./ownerAssignment.ts";

const vip = fc.tuple(fc.nat(255), fc.nat(255)).map(([a, b]) => `10.1.${a}.${b}`);
const vips = fc.uniqueArray(vip, { minLength: 1, maxLength: 60 });
const members = fc.uniqueArray(fc.stringMatching(/^lb-[a-z0-9]{1,6}$/), { minLength: 1, maxLength: 6 });

describe("ownerOf (rendezvous hashing)", () => {
  it("gives every VIP exactly one owner among the members, whatever their order", () => {
    fc.assert(
      fc.property(vips, members, (vs, ms) => {
        const owners = assignOwners(vs, ms);
        const reversed = assignOwners(vs, [...ms].reverse());
        for (const v of vs) {
          expect(ms).toContain(owners.get(v));
          expect(reversed.get(v)).toBe(owners.get(v));
        }
      }),
    );
  });

  it("moves only the VIPs of a member that leaves", () => {
    fc.assert(
      fc.property(
        vips,
        members.filter((m) => m.length >= 2),
        fc.nat(),
        (vs, ms, i) => {
          const gone = ms[i % ms.length]!;
          const before = assignOwners(vs, ms);
          const after = assignOwners(
            vs,
            ms.filter((m) => m !== gone),
          );
          for (const v of vs) if (before.get(v) !== gone) expect(after.get(v)).toBe(before.get(v));
        },
      ),
    );
  });

  it("moves to a joining member only VIPs it then owns", () => {
    fc.assert(
      fc.property(vips, members, (vs, ms) => {
        const joining = "lb-joining";
        const before = assignOwners(vs, ms);
        const after = assignOwners(vs, [...ms, joining]);
        for (const v of vs) if (after.get(v) !== joining) expect(after.get(v)).toBe(before.get(v));
      }),
    );
  });

  it("spreads VIPs over all members (active/active)", () => {
    const all = Array.from({ length: 300 }, (_, i) => `10.1.${i >> 8}.${i & 255}`);
    const counts = new Map<string, number>();
    for (const owner of assignOwners(all, ["lb-a", "lb-b", "lb-c"]).values())
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    expect(counts.size).toBe(3);
    for (const n of counts.values()) expect(n).toBeGreaterThan(70); // 100 expected each
  });

  it("has no owner without members", () => {
    expect(ownerOf("10.1.1.1", [])).toBeUndefined();
  });
});
