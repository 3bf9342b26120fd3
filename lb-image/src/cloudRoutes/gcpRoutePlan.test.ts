import fc from "fast-check";
import { gcpRouteDescription, gcpRouteName, ownedRoute, planGcpRoutes } from "./gcpRoutePlan.ts";

const inst = (n: string) => `projects/p/zones/z/instances/${n}`;

describe("GCP route names and ownership marks", () => {
  it("names are valid GCP resource names (RFC 1035, <= 63) and differ per VIP and instance", () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.stringMatching(/^[a-z][a-z0-9-]{0,40}$/), (vip, n) => {
        const name = gcpRouteName("0123456789abcdef", vip, inst(n));
        expect(name).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
        expect(name).not.toBe(gcpRouteName("0123456789abcdef", vip, inst(`${n}x`)));
      }),
    );
  });
  it("reads back only this group's marked routes", () => {
    const description = gcpRouteDescription("g1", "10.1.1.1", inst("a"));
    expect(ownedRoute("g1", { name: "r", description })).toEqual({
      name: "r",
      vip: "10.1.1.1",
      instance: inst("a"),
    });
    expect(ownedRoute("g2", { name: "r", description })).toBeUndefined();
    expect(ownedRoute("g1", { name: "r", description: "a team's route" })).toBeUndefined();
  });
});

describe("planGcpRoutes", () => {
  const route = (vip: string, n: string) => ({ name: `${vip}-${n}`, vip, instance: inst(n) });

  it("inserts this pod's missing routes and removes its routes for VIPs it no longer serves", () => {
    const plan = planGcpRoutes({
      routes: [route("10.1.1.1", "a"), route("10.1.1.2", "a"), route("10.1.1.1", "b")],
      served: new Set(["10.1.1.1", "10.1.1.3"]),
      self: inst("a"),
      cleanUp: new Set(),
    });
    expect(plan.insert).toEqual(["10.1.1.3"]);
    expect(plan.delete).toEqual([route("10.1.1.2", "a")]);
  });

  it("removes other instances' routes only when fenced to clean up after them", () => {
    const routes = [route("10.1.1.1", "b"), route("10.1.1.1", "c")];
    const plan = planGcpRoutes({
      routes,
      served: new Set(["10.1.1.1"]),
      self: inst("a"),
      cleanUp: new Set([inst("c")]),
    });
    expect(plan.delete).toEqual([route("10.1.1.1", "c")]);
  });
});
