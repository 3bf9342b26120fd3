import fc from "fast-check";
import { cidrContains, numberToIpv4 } from "./cidr.ts";
import {
  SOURCE_RANGES_ANNOTATION,
  formatIpv4Range,
  isSourceRange,
  readSourceRanges,
} from "./sourceRanges.ts";

const shown = (field?: string[], annotation?: string) => {
  const read = readSourceRanges(field, annotation);
  return { ...read, ranges: read.ranges?.map(formatIpv4Range) };
};

describe("readSourceRanges", () => {
  it("admits everyone when neither the field nor the annotation says otherwise", () => {
    expect(shown(undefined, undefined)).toEqual({ invalid: [], ranges: undefined });
    expect(shown([], "  ")).toEqual({ invalid: [], ranges: undefined });
    // A range that covers every address restricts nothing.
    expect(shown(["10.0.0.0/8", "0.0.0.0/0"])).toMatchObject({ ranges: undefined, invalid: [] });
  });

  it("takes the field over the annotation, and the annotation's comma-separated list without it", () => {
    expect(shown(["10.0.0.0/8"], "192.168.0.0/16")).toEqual({
      from: "spec.loadBalancerSourceRanges",
      ranges: ["10.0.0.0-10.255.255.255"],
      invalid: [],
    });
    expect(shown(undefined, " 192.168.1.0/24 , 172.16.0.7/32")).toEqual({
      from: `annotation ${SOURCE_RANGES_ANNOTATION}`,
      ranges: ["172.16.0.7-172.16.0.7", "192.168.1.0-192.168.1.255"],
      invalid: [],
    });
  });

  it("reads host bits as their network, merges overlapping and adjacent ranges, and lets IPv6 admit no one", () => {
    expect(shown(["10.1.2.3/16", "10.1.128.0/17", "10.2.0.0/16", "10.0.0.0/9"]).ranges).toEqual([
      "10.0.0.0-10.127.255.255",
    ]);
    expect(shown(["2001:db8::/32"])).toEqual({
      from: "spec.loadBalancerSourceRanges",
      ranges: [],
      invalid: [],
    });
  });

  it("names the entries that are no IP range, and then admits nothing by itself", () => {
    expect(readSourceRanges(undefined, "10.0.0.0/8,10.0.0.1,office")).toEqual({
      from: `annotation ${SOURCE_RANGES_ANNOTATION}`,
      invalid: ["10.0.0.1", "office"],
    });
    expect(isSourceRange(" fd00::/8 ")).toBe(true);
    expect(isSourceRange("10.0.0.0/33")).toBe(false);
  });

  it("admits exactly the addresses some given range holds", () => {
    const cidr = fc
      .tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 1, max: 32 }))
      .map(([n, bits]) => `${numberToIpv4(n)}/${bits}`);
    fc.assert(
      fc.property(
        fc.array(cidr, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        (cidrs, n) => {
          const { ranges } = readSourceRanges(cidrs, undefined);
          const ip = numberToIpv4(n);
          const admitted = ranges === undefined || ranges.some((r) => r.first <= n && n <= r.last);
          expect(admitted).toBe(cidrs.some((c) => cidrContains(c, ip)));
          // Sorted, disjoint and not adjacent: each range is one nft interval that overlaps no other.
          for (let i = 1; i < (ranges ?? []).length; i++)
            expect(ranges![i]!.first).toBeGreaterThan(ranges![i - 1]!.last + 1);
        },
      ),
    );
  });
});
