import fc from "fast-check";
import type { VirtualService } from "../../dataplane/model.ts";
import { dsrPlan } from "./dsrPlan.ts";

const svc = (
  vip: string,
  backends: [ip: string, node: string | undefined, weight?: number][],
  o: Partial<VirtualService> = {},
): VirtualService => ({
  vip,
  port: 80,
  protocol: "tcp",
  scheduler: "mh",
  forwarding: "dsr",
  backends: backends.map(([ip, nodeName, weight = 1]) => ({
    ip,
    port: 8080,
    weight,
    ...(nodeName && { nodeName }),
  })),
  ...o,
});

describe("dsrPlan", () => {
  it("gives each local backend pod the VIPs it serves by DSR, and the node the union", () => {
    const plan = dsrPlan(
      [
        svc("10.1.1.10", [
          ["10.244.1.5", "n1"],
          ["10.244.2.5", "n2"],
        ]),
        svc("10.1.1.11", [
          ["10.244.1.5", "n1"],
          ["10.244.1.6", "n1", 0],
        ]),
        // The same VIP on another port: one address.
        svc("10.1.1.10", [["10.244.1.5", "n1"]], { port: 443 }),
        // SNAT services and unset forwarding need nothing on the backend side.
        svc("10.1.1.12", [["10.244.1.7", "n1"]], { forwarding: "snat" }),
        svc("10.1.1.13", [["10.244.1.8", "n1"]], { forwarding: undefined }),
        // A backend whose node is unknown is nobody's to prepare.
        svc("10.1.1.14", [["10.244.1.9", undefined]]),
      ],
      "n1",
      ["192.168.0.11"],
    );
    expect(plan.pods).toEqual(
      new Map([
        ["10.244.1.5", ["10.1.1.10", "10.1.1.11"]],
        // Draining (weight 0): its established flows still need the VIP.
        ["10.244.1.6", ["10.1.1.11"]],
      ]),
    );
    expect(plan.vips).toEqual(["10.1.1.10", "10.1.1.11"]);
    // Every DSR VIP, with local backends or not (n2's, or nobody's): the node untracks them all.
    expect(plan.dsrVips).toEqual(["10.1.1.10", "10.1.1.11", "10.1.1.14"]);
    expect(plan.hostNetwork).toEqual([]);
  });

  it("reports host-network backends instead of preparing the node itself", () => {
    const plan = dsrPlan(
      [
        svc("10.1.1.10", [
          ["192.168.0.11", "n1"],
          ["10.244.1.5", "n1"],
        ]),
      ],
      "n1",
      ["192.168.0.11"],
    );
    expect(plan.hostNetwork).toEqual([{ ip: "192.168.0.11", vips: ["10.1.1.10"] }]);
    expect([...plan.pods.keys()]).toEqual(["10.244.1.5"]);
    expect(dsrPlan([svc("10.1.1.10", [["192.168.0.11", "n1"]])], "n1", ["192.168.0.11"]).vips).toEqual([]);
  });

  it("prepares exactly the local pods of DSR services, and the node's VIPs are theirs (property)", () => {
    const ip = fc.integer({ min: 1, max: 6 }).map((n) => `10.244.1.${n}`);
    const service = fc.record({
      vip: fc.integer({ min: 1, max: 4 }).map((n) => `10.1.1.${n}`),
      port: fc.constantFrom(80, 443),
      protocol: fc.constant("tcp" as const),
      scheduler: fc.constant("mh" as const),
      forwarding: fc.constantFrom("dsr" as const, "snat" as const, undefined),
      backends: fc.array(
        fc.record({
          ip,
          port: fc.constant(8080),
          weight: fc.constantFrom(0, 1),
          nodeName: fc.constantFrom("n1", "n2"),
        }),
        { maxLength: 4 },
      ),
    });
    fc.assert(
      fc.property(
        fc.array(service, { maxLength: 6 }),
        fc.subarray(["10.244.1.1", "10.244.1.2"]),
        (services, node) => {
          const plan = dsrPlan(services, "n1", node);
          for (const s of services)
            for (const b of s.backends) {
              const local = s.forwarding === "dsr" && b.nodeName === "n1";
              if (local && !node.includes(b.ip)) expect(plan.pods.get(b.ip)).toContain(s.vip);
              if (local && node.includes(b.ip))
                expect(plan.hostNetwork.find((h) => h.ip === b.ip)?.vips).toContain(s.vip);
            }
          for (const [podIp, vips] of plan.pods) {
            expect(node).not.toContain(podIp);
            for (const vip of vips)
              expect(
                services.some(
                  (s) =>
                    s.forwarding === "dsr" &&
                    s.vip === vip &&
                    s.backends.some((b) => b.ip === podIp && b.nodeName === "n1"),
                ),
              ).toBe(true);
          }
          expect(plan.vips).toEqual([...new Set([...plan.pods.values()].flat())].sort());
          expect(plan.dsrVips).toEqual(
            [...new Set(services.filter((s) => s.forwarding === "dsr").map((s) => s.vip))].sort(),
          );
        },
      ),
    );
  });
});
