import fc from "fast-check";
import { decideAnnouncements, probeSources, type AnnounceInputs } from "./announceDecision.ts";

const POOLS = ["10.1.1.0/24", "10.1.2.0/24"];
const RRS = ["172.16.0.1", "172.16.0.2"];
const up = { established: true, bfdUp: true };
const base: AnnounceInputs = {
  candidates: ["10.1.1.2", "10.1.2.7", "10.1.1.1"],
  pools: POOLS,
  nodeRoute: new Map(POOLS.map((p) => [p, true])),
  ready: true,
  sessions: new Map(RRS.map((r) => [r, up])),
  reflectors: RRS,
  draining: false,
};

describe("decideAnnouncements", () => {
  it("announces every candidate on every BFD-protected session when the whole path works", () => {
    expect(decideAnnouncements(base)).toEqual({
      vips: ["10.1.1.1", "10.1.1.2", "10.1.2.7"],
      exportTo: RRS,
      holds: [],
    });
  });

  it("holds back a pool whose node route is missing or not checked yet, and only that pool", () => {
    const d = decideAnnouncements({ ...base, nodeRoute: new Map([["10.1.1.0/24", true]]) });
    expect(d.vips).toEqual(["10.1.1.1", "10.1.1.2"]);
    expect(d.holds).toEqual([{ reason: "NodeRouteMissing", subject: "10.1.2.0/24" }]);
    const other = new Map([
      ["10.1.1.0/24", false],
      ["10.1.2.0/24", true],
    ]);
    expect(decideAnnouncements({ ...base, nodeRoute: other }).vips).toEqual(["10.1.2.7"]);
  });

  it("announces nothing while the pod is not Ready, or draining; an unknown readiness does not hold", () => {
    expect(decideAnnouncements({ ...base, ready: false })).toMatchObject({
      vips: [],
      holds: [{ reason: "NotReady" }],
    });
    expect(decideAnnouncements({ ...base, draining: true })).toMatchObject({
      vips: [],
      holds: [{ reason: "Draining" }],
    });
    expect(decideAnnouncements({ ...base, ready: undefined }).vips).toHaveLength(3);
  });

  it("exports only on sessions whose BFD is Up, and reports an established one without BFD", () => {
    const sessions = new Map([
      [RRS[0]!, { established: true, bfdUp: false }],
      [RRS[1]!, { established: false, bfdUp: false }],
    ]);
    const d = decideAnnouncements({ ...base, sessions });
    expect(d.exportTo).toEqual([]);
    expect(d.holds).toEqual([{ reason: "BfdNotUp", subject: RRS[0] }]);
    // A join: nothing known about the sessions yet exports nowhere.
    expect(decideAnnouncements({ ...base, sessions: new Map() }).exportTo).toEqual([]);
  });

  it("never announces a VIP without a verified route for its pool, a Ready pod and candidacy (property)", () => {
    const vip = fc.constantFrom("10.1.1.1", "10.1.1.9", "10.1.2.3", "10.9.9.9");
    fc.assert(
      fc.property(
        fc.array(vip, { maxLength: 5 }),
        fc.dictionary(fc.constantFrom(...POOLS), fc.boolean()),
        fc.constantFrom(true, false, undefined),
        fc.boolean(),
        (candidates, routes, ready, draining) => {
          const nodeRoute = new Map(Object.entries(routes));
          const d = decideAnnouncements({ ...base, candidates, nodeRoute, ready, draining });
          for (const v of d.vips) {
            expect(candidates).toContain(v);
            expect(nodeRoute.get(POOLS.find((p) => v.startsWith(p.slice(0, 7)))!)).toBe(true);
          }
          if (ready === false || draining) expect(d.vips).toEqual([]);
        },
      ),
    );
  });
});

describe("probeSources", () => {
  it("checks each pool from its lowest candidate VIP, numerically", () => {
    expect(probeSources(["10.1.1.10", "10.1.1.9", "10.1.2.200", "10.9.0.1"], POOLS)).toEqual(
      new Map([
        ["10.1.1.0/24", "10.1.1.9"],
        ["10.1.2.0/24", "10.1.2.200"],
      ]),
    );
  });
});
