import fc from "fast-check";
import { desiredRoutes, lbPodState, lbPodVerdict, type LbPodState } from "./desiredRoutes.ts";
import type { NodeRoute } from "./desiredRoutes.ts";
import { parseForwarding } from "./nodeForwarding.ts";
import { NODE_ROUTE_PROTO, diffRoutes, parseRoutes, routeCommand } from "./nodeRoutes.ts";

const POOLS = ["10.1.2.0/24", "10.1.1.0/24"];
const pod = (name: string, o: Partial<LbPodState> = {}): LbPodState => ({
  name,
  nodeName: "n1",
  ip: `10.244.1.${name.length + 10}`,
  ready: true,
  terminating: false,
  ...o,
});

describe("desiredRoutes", () => {
  it("routes every pool to the ready LB pod on this node, sorted", () => {
    expect(desiredRoutes("n1", [pod("a"), pod("b", { nodeName: "n2", ip: "10.244.2.5" })], POOLS)).toEqual([
      { prefix: "10.1.1.0/24", via: ["10.244.1.11"] },
      { prefix: "10.1.2.0/24", via: ["10.244.1.11"] },
    ]);
  });

  it("makes a multipath route when several LB pods on the node are ready", () => {
    const routes = desiredRoutes("n1", [pod("a", { ip: "10.244.1.9" }), pod("bb")], ["10.1.1.0/24"]);
    expect(routes).toEqual([{ prefix: "10.1.1.0/24", via: ["10.244.1.12", "10.244.1.9"] }]);
  });

  it("keeps the routed pod while no ready one exists (not ready or draining), never routes to a starting pod", () => {
    const draining = pod("a", { ready: false, terminating: true });
    const starting = pod("bb", { ready: false });
    const routedToA = [draining.ip!];
    expect(desiredRoutes("n1", [draining, starting], ["10.1.1.0/24"], routedToA)).toEqual([
      { prefix: "10.1.1.0/24", via: ["10.244.1.11"] },
    ]);
    // A ready pod takes over at once.
    expect(desiredRoutes("n1", [draining, pod("bb")], ["10.1.1.0/24"], routedToA)[0]!.via).toEqual([
      "10.244.1.12",
    ]);
    // The routed pod lost readiness (its node's kubelet died): the route stays until it is gone.
    const unready = pod("a", { ready: false });
    expect(desiredRoutes("n1", [unready], POOLS, routedToA)).toHaveLength(2);
    expect(desiredRoutes("n1", [], POOLS, routedToA)).toEqual([]);
    // Never routed: a draining or starting pod gets nothing.
    expect(desiredRoutes("n1", [draining, starting], POOLS)).toEqual([]);
    expect(desiredRoutes("n1", [starting], POOLS, ["10.244.1.99"])).toEqual([]);
    expect(desiredRoutes("n1", [pod("a", { ip: undefined })], POOLS)).toEqual([]);
  });

  it("tells an LB pod whether every pool is routed to it and whether it is ready", () => {
    const routes = desiredRoutes("n1", [pod("a")], POOLS);
    expect(lbPodVerdict("n1", [pod("a")], routes, POOLS, "10.244.1.11")).toEqual({
      routed: true,
      ready: true,
    });
    expect(lbPodVerdict("n1", [pod("a", { ready: false })], routes, POOLS, "10.244.1.11")).toEqual({
      routed: true,
      ready: false,
    });
    expect(lbPodVerdict("n1", [pod("a", { terminating: true })], routes, POOLS, "10.244.1.11").ready).toBe(
      false,
    );
    // One pool missing, another pod's address, another node's pod of the same address.
    expect(lbPodVerdict("n1", [pod("a")], routes.slice(1), POOLS, "10.244.1.11").routed).toBe(false);
    expect(lbPodVerdict("n1", [pod("a")], routes, POOLS, "10.244.1.50")).toEqual({
      routed: false,
      ready: false,
    });
    expect(lbPodVerdict("n2", [pod("a")], routes, POOLS, "10.244.1.11").ready).toBe(false);
  });

  it("only ever points at pods of this node that have an address (property)", () => {
    const arbitraryPod = fc.record({
      name: fc.string(),
      nodeName: fc.constantFrom("n1", "n2", undefined),
      ip: fc.option(
        fc.integer({ min: 1, max: 9 }).map((n) => `10.244.1.${n}`),
        { nil: undefined },
      ),
      ready: fc.boolean(),
      terminating: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(arbitraryPod, { maxLength: 6 }),
        fc.subarray(["10.244.1.1", "10.244.1.2"]),
        (pods, routedNow) => {
          const routes = desiredRoutes("n1", pods, POOLS, routedNow);
          const allowed = new Set(pods.filter((p) => p.nodeName === "n1" && p.ip).map((p) => p.ip));
          for (const r of routes) for (const hop of r.via) expect(allowed.has(hop)).toBe(true);
          // Either every pool is routed the same way or none is.
          expect(routes.length === 0 || routes.length === POOLS.length).toBe(true);
          // A next hop is a ready pod, or one the pools were already routed to (never a starting one).
          for (const r of routes)
            for (const hop of r.via)
              expect(
                routedNow.includes(hop) || pods.some((p) => p.ip === hop && p.nodeName === "n1" && p.ready),
              ).toBe(true);
          if (pods.some((p) => p.nodeName === "n1" && p.ip && p.ready && !p.terminating))
            for (const r of routes)
              for (const hop of r.via)
                expect(
                  pods.some((p) => p.ip === hop && p.nodeName === "n1" && p.ready && !p.terminating),
                ).toBe(true);
        },
      ),
    );
  });

  it("reads a Pod's readiness, address and deletion", () => {
    expect(
      lbPodState({
        metadata: { name: "lb-1", deletionTimestamp: new Date() },
        spec: { nodeName: "n1", containers: [] },
        status: { podIP: "10.244.1.4", conditions: [{ type: "Ready", status: "True" }] },
      }),
    ).toEqual({ name: "lb-1", nodeName: "n1", ip: "10.244.1.4", ready: true, terminating: true });
    expect(lbPodState({ metadata: { name: "x" } }).ready).toBe(false);
  });
});

describe("node routes", () => {
  it("parses single and multipath routes from ip -j", () => {
    const json = JSON.stringify([
      { dst: "10.1.1.0/24", gateway: "10.244.1.5", dev: "cni0", protocol: String(NODE_ROUTE_PROTO) },
      {
        dst: "10.1.2.0/24",
        protocol: String(NODE_ROUTE_PROTO),
        nexthops: [
          { gateway: "10.244.1.9", dev: "cni0", weight: 1 },
          { gateway: "10.244.1.5", dev: "cni0", weight: 1 },
        ],
      },
      { dst: "10.1.3.7", gateway: "10.244.1.5" },
    ]);
    expect(parseRoutes(json)).toEqual([
      { prefix: "10.1.1.0/24", via: ["10.244.1.5"] },
      { prefix: "10.1.2.0/24", via: ["10.244.1.5", "10.244.1.9"] },
      { prefix: "10.1.3.7/32", via: ["10.244.1.5"] },
    ]);
    expect(parseRoutes("")).toEqual([]);
  });

  it("renders ip route commands tagged with our protocol", () => {
    expect(routeCommand({ prefix: "10.1.1.0/24", via: ["10.244.1.5"] })).toEqual(
      "route replace 10.1.1.0/24 proto 211 via 10.244.1.5".split(" "),
    );
    expect(routeCommand({ prefix: "10.1.1.0/24", via: ["a", "b"] }).slice(5)).toEqual(
      "nexthop via a nexthop via b".split(" "),
    );
  });

  it("diffs to the minimal change, and a diff against the result is empty (property)", () => {
    const route: fc.Arbitrary<NodeRoute> = fc.record({
      prefix: fc.constantFrom("10.1.1.0/24", "10.1.2.0/24", "10.1.3.0/24"),
      via: fc.uniqueArray(fc.constantFrom("10.244.1.2", "10.244.1.3"), { minLength: 1 }).map((v) => v.sort()),
    });
    const table = fc.uniqueArray(route, { selector: (r) => r.prefix });
    fc.assert(
      fc.property(table, table, (current, desired) => {
        const { replace, remove } = diffRoutes(current, desired);
        const applied = [
          ...current.filter((r) => !remove.includes(r.prefix) && !replace.some((x) => x.prefix === r.prefix)),
          ...replace,
        ];
        const key = (rs: typeof current) => rs.map((r) => `${r.prefix}>${r.via.join(",")}`).sort();
        expect(key(applied)).toEqual(key(desired));
        expect(diffRoutes(applied, desired)).toEqual({ replace: [], remove: [] });
        // Untouched routes are not rewritten.
        for (const r of replace) expect(current).not.toContainEqual(r);
      }),
    );
  });
});

describe("node forwarding", () => {
  it("reads the node-wide IPv4 forwarding switch from ip -j netconf", () => {
    const conf = (all: boolean) =>
      JSON.stringify([
        { family: "inet", interface: "lo", forwarding: !all, rp_filter: "off" },
        { family: "inet", interface: "all", forwarding: all, rp_filter: "strict" },
      ]);
    expect(parseForwarding(conf(true))).toBe(true);
    expect(parseForwarding(conf(false))).toBe(false);
    expect(parseForwarding("[]")).toBe(false);
  });
});
