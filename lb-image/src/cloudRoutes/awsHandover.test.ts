import { planAwsHandover } from "./awsHandover.ts";
import { ownerOf } from "./ownerAssignment.ts";

describe("planAwsHandover", () => {
  const vips = Array.from({ length: 12 }, (_, i) => `10.1.1.${i + 1}`);
  const members = [
    { identity: "lb-a", target: "eni-a" },
    { identity: "lb-b", target: "eni-b" },
    { identity: "lb-c", target: "eni-c" },
  ];
  const tables = ["rtb-1", "rtb-2"];
  const ours = new Set(["eni-a", "eni-b", "eni-c"]);
  const mine = vips.filter((v) => ownerOf(v, ["lb-a", "lb-b", "lb-c"]) === "lb-a");
  const routesTo = (target: string, vs: readonly string[]) =>
    tables.flatMap((table) => vs.map((vip) => ({ table, vip, target })));

  it("points each VIP at the owner the others compute without this pod", () => {
    const h = planAwsHandover({
      vips: mine,
      self: "lb-a",
      members,
      tables,
      routes: routesTo("eni-a", mine),
      ours,
    });
    expect(mine.length).toBeGreaterThan(0);
    expect(h.orphaned).toEqual([]);
    expect(h.unknownTarget).toEqual([]);
    for (const move of h.moves) {
      for (const vip of move.vips) expect(ownerOf(vip, ["lb-b", "lb-c"])).toBe(move.successor);
      expect(move.target).toBe(`eni-${move.successor.slice(3)}`);
      expect(move.plan.replace).toEqual(
        tables.flatMap((table) => move.vips.map((vip) => ({ table, vip, from: "eni-a" }))),
      );
      expect(move.plan.create).toEqual([]);
    }
    expect(h.moves.flatMap((m) => m.vips).sort()).toEqual([...mine].sort());
  });

  it("creates a missing route, skips one already at the successor, never touches a foreign one", () => {
    const vip = mine[0]!;
    const successor = ownerOf(vip, ["lb-b", "lb-c"])!;
    const foreign = { table: "rtb-2", vip, target: "eni-someone-else" };
    const h = planAwsHandover({
      vips: [vip],
      self: "lb-a",
      members,
      tables: [...tables, "rtb-3"],
      routes: [{ table: "rtb-1", vip, target: `eni-${successor.slice(3)}` }, foreign],
      ours,
    });
    expect(h.moves).toHaveLength(1);
    expect(h.moves[0]!.plan).toMatchObject({
      create: [{ table: "rtb-3", vip }],
      replace: [],
      foreign: [foreign],
    });
  });

  it("leaves the routes as they are when no live pod is left", () => {
    const h = planAwsHandover({
      vips: mine,
      self: "lb-a",
      members: [members[0]!],
      tables,
      routes: routesTo("eni-a", mine),
      ours,
    });
    expect(h).toEqual({ moves: [], orphaned: mine, unknownTarget: [] });
  });

  it("leaves a VIP whose successor's target is unknown to the successor", () => {
    const vip = mine[0]!;
    const successor = ownerOf(vip, ["lb-b", "lb-c"])!;
    const h = planAwsHandover({
      vips: [vip],
      self: "lb-a",
      members: members.map((m) => (m.identity === successor ? { ...m, target: "" } : m)),
      tables,
      routes: routesTo("eni-a", [vip]),
      ours,
    });
    expect(h).toEqual({ moves: [], orphaned: [], unknownTarget: [{ vip, successor }] });
  });
});
