import { planAwsRoutes } from "./awsRoutePlan.ts";

describe("planAwsRoutes", () => {
  const base = { tables: ["rtb-1", "rtb-2"], self: "eni-me", ours: new Set(["eni-me", "eni-other-lb"]) };

  it("creates missing routes in every table and leaves correct ones", () => {
    const plan = planAwsRoutes({
      ...base,
      routes: [{ table: "rtb-1", vip: "10.1.1.1", target: "eni-me" }],
      point: new Set(["10.1.1.1"]),
      remove: new Set(),
    });
    expect(plan).toEqual({
      create: [{ table: "rtb-2", vip: "10.1.1.1" }],
      replace: [],
      remove: [],
      foreign: [],
      inside: [],
    });
  });

  it("takes over routes of our other LB pods, never a foreign one", () => {
    const foreign = { table: "rtb-2", vip: "10.1.1.1", target: "eni-someone-else" };
    const plan = planAwsRoutes({
      ...base,
      routes: [{ table: "rtb-1", vip: "10.1.1.1", target: "eni-other-lb" }, foreign],
      point: new Set(["10.1.1.1"]),
      remove: new Set(),
    });
    expect(plan.replace).toEqual([{ table: "rtb-1", vip: "10.1.1.1", from: "eni-other-lb" }]);
    expect(plan.create).toEqual([]);
    expect(plan.foreign).toEqual([foreign]);
  });

  it("removes stale routes only where they point at us", () => {
    const plan = planAwsRoutes({
      ...base,
      routes: [
        { table: "rtb-1", vip: "10.1.1.9", target: "eni-other-lb" },
        { table: "rtb-2", vip: "10.1.1.9", target: "igw-1" },
      ],
      point: new Set(),
      remove: new Set(["10.1.1.9"]),
    });
    expect(plan.remove).toEqual([{ table: "rtb-1", vip: "10.1.1.9" }]);
    expect(plan.foreign).toEqual([{ table: "rtb-2", vip: "10.1.1.9", target: "igw-1" }]);
  });

  it("reports a VIP inside a table's local range instead of routing it there", () => {
    const plan = planAwsRoutes({
      ...base,
      routes: [],
      point: new Set(["10.0.3.7", "10.1.1.1"]),
      remove: new Set(),
      local: [{ table: "rtb-1", cidr: "10.0.0.0/16" }],
    });
    expect(plan.inside).toEqual([{ table: "rtb-1", vip: "10.0.3.7", cidr: "10.0.0.0/16" }]);
    expect(plan.create).toEqual([
      { table: "rtb-1", vip: "10.1.1.1" },
      { table: "rtb-2", vip: "10.0.3.7" },
      { table: "rtb-2", vip: "10.1.1.1" },
    ]);
  });
});
