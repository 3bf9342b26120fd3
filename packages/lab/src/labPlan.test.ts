import { ConfigError } from "@portable-lb/core";
import { labPlan, parseLabEnvironment, LAB_ROLE_LABEL } from "./labPlan.ts";

const network = {
  nodeCidr: "192.168.100.0/24",
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
};

describe("labPlan", () => {
  it("lays out the paper's topology on the node network: router .1, control plane .2, LB nodes .11…, workers .21…", () => {
    const plan = labPlan(parseLabEnvironment({ kind: "lab" }), network);
    expect(plan.router).toMatchObject({
      netns: "plb-lab-router",
      ip: "192.168.100.1",
      clientIp: "198.18.0.1",
    });
    expect(plan.client).toEqual({ netns: "plb-lab-client", ip: "198.18.0.2", cidr: "198.18.0.0/24" });
    expect(plan.controlPlane).toMatchObject({ netns: "plb-lab-cp", ip: "192.168.100.2", port: 6443 });
    expect(plan.nodes.map((n) => [n.name, n.ip, n.netns, n.fabricIface])).toEqual([
      ["lb1", "192.168.100.11", "plb-lab-lb1", "plb-lab-11"],
      ["lb2", "192.168.100.12", "plb-lab-lb2", "plb-lab-12"],
      ["lb3", "192.168.100.13", "plb-lab-lb3", "plb-lab-13"],
      ["worker1", "192.168.100.21", "plb-lab-worker1", "plb-lab-21"],
      ["worker2", "192.168.100.22", "plb-lab-worker2", "plb-lab-22"],
      ["worker3", "192.168.100.23", "plb-lab-worker3", "plb-lab-23"],
    ]);
    expect(plan.reflectors).toEqual([
      { node: "worker1", address: "192.168.100.21" },
      { node: "worker2", address: "192.168.100.22" },
    ]);
  });

  it("puts a second platform behind the first one's router and client (its site)", () => {
    const first = labPlan(parseLabEnvironment({ kind: "lab" }), network);
    const second = labPlan(parseLabEnvironment({ kind: "lab", name: "plb-lab-b", site: "plb-lab" }), {
      ...network,
      nodeCidr: "192.168.101.0/24",
    });
    expect(second.site).toBe("plb-lab");
    expect(second.router.netns).toBe(first.router.netns);
    expect(second.client).toEqual(first.client);
    // Its own node network and bridge on the router, the same router identity.
    expect(second.router).toMatchObject({
      ip: "192.168.101.1",
      bridge: "br-plb-lab-b",
      routerId: "198.18.0.1",
    });
    expect(first.router).toMatchObject({ ip: "192.168.100.1", bridge: "br-plb-lab", routerId: "198.18.0.1" });
    expect(second.controlPlane).toMatchObject({ netns: "plb-lab-b-cp", fabricIface: "plb-lab-b-2" });
    // No interface in the router's namespace is named twice.
    const ifaces = (p: typeof first) => [
      p.router.bridge,
      p.controlPlane.fabricIface,
      ...p.nodes.map((n) => n.fabricIface),
    ];
    const all = [...ifaces(first), ...ifaces(second), first.router.clientIface];
    expect(new Set(all).size).toBe(all.length);
  });

  it("labels LB nodes for the LB pods and every node with its role", () => {
    const plan = labPlan(
      parseLabEnvironment({ kind: "lab", lbNodes: 1, workerNodes: 1, reflectors: 1 }),
      network,
    );
    expect(plan.nodes.map((n) => n.labels)).toEqual([
      { [LAB_ROLE_LABEL]: "lb", "portable-lb.io/load-balancer": "true" },
      { [LAB_ROLE_LABEL]: "worker" },
    ]);
  });

  it("keeps every interface name within Linux's 15 characters and every namespace name distinct", () => {
    const plan = labPlan(
      parseLabEnvironment({ kind: "lab", name: "abcdefghijkl", lbNodes: 9, workerNodes: 9 }),
      network,
    );
    const names = [
      plan.router.netns,
      plan.client.netns,
      plan.controlPlane.netns,
      ...plan.nodes.map((n) => n.netns),
    ];
    expect(new Set(names).size).toBe(names.length);
    for (const iface of [
      plan.router.bridge,
      plan.router.clientIface,
      plan.controlPlane.fabricIface,
      ...plan.nodes.map((n) => n.fabricIface),
    ])
      expect(iface.length).toBeLessThanOrEqual(15);
  });

  it.each([
    [
      { nodeCidr: "192.168.100.0/28" },
      {},
      /network\.nodeCidr: the lab needs at least a \/27.*got "192\.168\.100\.0\/28"/,
    ],
    [
      {},
      { clientCidr: "10.244.5.0/24" },
      /environment\.clientCidr: overlaps network\.podCidr \(10\.244\.0\.0\/16\).*got "10\.244\.5\.0\/24"/,
    ],
    [
      {},
      { workerNodes: 1, reflectors: 2 },
      /environment\.reflectors: each route reflector needs a worker node of its own \(got 2 with 1 workers\)/,
    ],
  ])("refuses %j %j with an error naming the field, the value and the fix", (net, env, message) => {
    expect(() => labPlan(parseLabEnvironment({ kind: "lab", ...env }), { ...network, ...net })).toThrow(
      ConfigError,
    );
    expect(() => labPlan(parseLabEnvironment({ kind: "lab", ...env }), { ...network, ...net })).toThrow(
      message,
    );
  });

  it("refuses bad environment fields at preview time, naming them", () => {
    expect(() => parseLabEnvironment({ kind: "lab", lbNodes: 0 })).toThrow(/environment\.lbNodes/);
    expect(() => parseLabEnvironment({ kind: "lab", name: "Lab_1" })).toThrow(/environment\.name/);
    expect(() => parseLabEnvironment({ kind: "lab", site: "Site!" })).toThrow(/environment\.site/);
  });
});
