// The cloud node planner over arbitrary zones, machine counts and node networks: every machine gets
// its own address inside its zone's subnet and clear of the addresses the clouds reserve, subnets
// never overlap, and when a network is too small the size the error suggests does hold the machines.
import fc from "fast-check";
import {
  ConfigError,
  cidrContains,
  cidrRange,
  cidrsOverlap,
  ipv4ToNumber,
  numberToIpv4,
} from "@portable-lb/core";
import { cloudNodePlan, type CloudNodePlanInput } from "./cloudNodePlan.ts";

const clouds = {
  aws: { zonalSubnets: true, smallestSubnetPrefix: 28, largestPrefix: 16 },
  gcp: { zonalSubnets: false, smallestSubnetPrefix: 29 },
} as const;

const arbitraryInput = fc
  .record({
    cloud: fc.constantFrom<keyof typeof clouds>("aws", "gcp"),
    zones: fc.integer({ min: 2, max: 5 }),
    lb: fc.integer({ min: 1, max: 20 }),
    workers: fc.integer({ min: 0, max: 50 }),
    prefix: fc.integer({ min: 12, max: 29 }),
    base: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  })
  .map((r): CloudNodePlanInput => ({
    name: "plb",
    zones: Array.from({ length: r.zones }, (_, i) => `zone-${"abcde"[i]}`),
    counts: { lb: r.lb, workers: r.workers },
    // The network address of a random prefix of that length.
    nodeCidr: `${numberToIpv4(Math.floor(r.base / 2 ** (32 - r.prefix)) * 2 ** (32 - r.prefix))}/${r.prefix}`,
    ...clouds[r.cloud],
  }));

function plan(input: CloudNodePlanInput) {
  try {
    return { plan: cloudNodePlan(input) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { problems: err.problems };
  }
}

let planned = 0;
let refused = 0;
// Both outcomes are exercised, so neither property holds vacuously.
afterAll(() => {
  expect(planned).toBeGreaterThan(50);
  expect(refused).toBeGreaterThan(50);
});

describe("cloudNodePlan", () => {
  it("gives every machine its own usable address in its zone's subnet", () => {
    fc.assert(
      fc.property(arbitraryInput, (input) => {
        const { plan: p } = plan(input);
        if (!p) return;
        planned++;
        expect(p.subnets).toHaveLength(input.zonalSubnets ? input.zones.length : 1);
        p.subnets.forEach((s, i) => {
          const r = cidrRange(s.cidr);
          expect(cidrContains(input.nodeCidr, numberToIpv4(r.first))).toBe(true);
          expect(cidrContains(input.nodeCidr, numberToIpv4(r.last))).toBe(true);
          for (const other of p.subnets.slice(0, i)) expect(cidrsOverlap(other.cidr, s.cidr)).toBe(false);
          expect(Number(s.cidr.split("/")[1])).toBeLessThanOrEqual(input.smallestSubnetPrefix);
        });
        expect(p.nodes).toHaveLength(1 + input.counts.lb + input.counts.workers);
        expect(new Set(p.nodes.map((n) => n.address)).size).toBe(p.nodes.length);
        expect(new Set(p.nodes.map((n) => n.name)).size).toBe(p.nodes.length);
        expect(p.nodes.filter((n) => n.role === "lb")).toHaveLength(input.counts.lb);
        for (const node of p.nodes) {
          expect(input.zones).toContain(node.zone);
          const subnet = p.subnets.find((s) => s.zone === node.zone) ?? p.subnets[0]!;
          const r = cidrRange(subnet.cidr);
          const at = ipv4ToNumber(node.address);
          // Clear of the first addresses (AWS reserves 4, GCP 2) and the last two.
          expect(at - r.first).toBeGreaterThanOrEqual(10);
          expect(r.last - at).toBeGreaterThanOrEqual(2);
        }
        // The LB nodes are spread over the zones: no zone holds two more than another.
        const perZone = input.zones.map((z) => p.nodes.filter((n) => n.role === "lb" && n.zone === z).length);
        expect(Math.max(...perZone) - Math.min(...perZone)).toBeLessThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  it("suggests, for a network too small or too large, a size that works", () => {
    fc.assert(
      fc.property(arbitraryInput, (input) => {
        const { problems } = plan(input);
        if (!problems) return;
        refused++;
        expect(problems).toHaveLength(1);
        const [, suggested] = /use a \/(\d+) or (?:larger|smaller)/.exec(problems[0]!) ?? [];
        expect(suggested).toBeDefined();
        const [address] = input.nodeCidr.split("/");
        const prefix = Number(suggested);
        const base = Math.floor(ipv4ToNumber(address!) / 2 ** (32 - prefix)) * 2 ** (32 - prefix);
        expect(plan({ ...input, nodeCidr: `${numberToIpv4(base)}/${prefix}` }).plan).toBeDefined();
      }),
      { numRuns: 300 },
    );
  });
});
