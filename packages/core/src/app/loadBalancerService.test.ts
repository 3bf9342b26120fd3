import * as pulumi from "@pulumi/pulumi";
import { installMocks, settled, typeChain } from "../../../../test/unit/pulumiMocks.ts";
import { LoadBalancerService, type LoadBalancerServiceArgs } from "./loadBalancerService.ts";

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

const args: LoadBalancerServiceArgs = {
  namespace: "shop",
  name: "web",
  selector: { app: "web" },
  ports: [{ name: "http", port: 80, targetPort: 8080 }],
  vipPools: [
    { name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: false },
    { name: "internal", cidr: "10.1.2.0/24", avoidBuggyIps: false },
  ],
};

describe("LoadBalancerService", () => {
  it("creates a LoadBalancer Service of portable-lb's class with the requested VIP annotated", async () => {
    const svc = new LoadBalancerService("web", { ...args, vips: ["10.1.1.10"] });
    await settled();
    expect(await typeChain(svc.service)).toBe(
      "portable-lb:core:LoadBalancerService$kubernetes:core/v1:Service",
    );
    const s = recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs;
    expect(s.metadata).toEqual({
      name: "web",
      namespace: "shop",
      annotations: { "portable-lb.io/load-balancer-ips": "10.1.1.10" },
    });
    expect(s.spec).toMatchObject({
      type: "LoadBalancer",
      loadBalancerClass: "portable-lb.io/ecmp",
      selector: { app: "web" },
      allocateLoadBalancerNodePorts: false,
      externalTrafficPolicy: "Cluster",
    });
  });

  it("asks for a pool instead of an address", async () => {
    new LoadBalancerService("web", { ...args, pool: "internal" });
    await settled();
    const s = recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs;
    expect(s.metadata.annotations).toEqual({ "portable-lb.io/vip-pool": "internal" });
  });

  it("admits only the given source ranges (spec.loadBalancerSourceRanges)", async () => {
    new LoadBalancerService("web", { ...args, sourceRanges: ["203.0.113.0/24", "10.0.0.0/8"] });
    await settled();
    const s = recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs;
    expect(s.spec.loadBalancerSourceRanges).toEqual(["203.0.113.0/24", "10.0.0.0/8"]);
    recorded.length = 0;
    new LoadBalancerService("open", args);
    await settled();
    expect(recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs.spec).not.toHaveProperty(
      "loadBalancerSourceRanges",
    );
  });

  it("annotates a withdrawal and a handover for a migration, and nothing when unset", async () => {
    const warn = jest.spyOn(pulumi.log, "warn").mockResolvedValue();
    new LoadBalancerService("web", {
      ...args,
      announce: false,
      handover: {
        from: ["192.168.100.11", "192.168.100.12"],
        relay: "all",
        acceptFrom: ["192.168.101.11"],
      },
    });
    await settled();
    const s = recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs;
    expect(s.metadata.annotations).toEqual({
      "portable-lb.io/announce": "false",
      "portable-lb.io/handover-from": "192.168.100.11,192.168.100.12",
      "portable-lb.io/handover-relay": "all",
      "portable-lb.io/handover-accept-from": "192.168.101.11",
    });
    recorded.length = 0;
    new LoadBalancerService("plain", { ...args, announce: true });
    await settled();
    expect(
      recorded.find((r) => r.type === "kubernetes:core/v1:Service")!.inputs.metadata.annotations,
    ).toEqual({});
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
  });

  it.each<[string, Partial<LoadBalancerServiceArgs>, string]>([
    [
      "a source range that is no prefix",
      { sourceRanges: ["10.0.0.0/8", "office"] },
      'service.sourceRanges[1]: not an IPv4 prefix; write it like 10.0.0.0/24 (got "office")',
    ],
    [
      "a source range with host bits",
      { sourceRanges: ["203.0.113.7/24"] },
      'service.sourceRanges[0]: host bits are set; write the network address 203.0.113.0/24 (got "203.0.113.7/24")',
    ],
    [
      "an IPv6 source range (the VIPs are IPv4)",
      { sourceRanges: ["2001:db8::/32"] },
      'service.sourceRanges[0]: IPv6 is not supported yet; use an IPv4 prefix like 10.0.0.0/24 (got "2001:db8::/32")',
    ],
    [
      "an empty list of source ranges",
      { sourceRanges: [] },
      "service.sourceRanges: admits no client; omit it to admit every one (got [])",
    ],
    [
      "a VIP outside the pools",
      { vips: ["10.9.9.9"] },
      'service.vips[0]: is outside every VIP pool (web 10.1.1.0/24, internal 10.1.2.0/24) (got "10.9.9.9"); pick an address inside a pool, or leave vips unset to get one allocated',
    ],
    [
      "a VIP in another pool than asked",
      { vips: ["10.1.2.5"], pool: "web" },
      'service.vips[0]: lies in pool internal, not in the requested pool web (got "10.1.2.5"); drop one of the two',
    ],
    [
      "an unknown pool",
      { pool: "dmz" },
      'service.pool: no such VIP pool (got "dmz"); use one of: web, internal',
    ],
    [
      "a malformed VIP",
      { vips: ["10.1.1"] },
      'service.vips[0]: not an IPv4 address; write it like 10.0.0.1 (got "10.1.1")',
    ],
    [
      "a handover address that is no address",
      { handover: { from: ["lb1"] } },
      'service.handover.from[0]: not an IPv4 address; write it like 10.0.0.1 (got "lb1")',
    ],
    [
      "a handover relay without its addresses",
      { handover: { relay: "all", acceptFrom: ["192.168.101.11"] } },
      'service.handover.relay: says which flows go to handover.from, which is unset (got "all"); set from to the old platform\'s LB node addresses, or drop relay',
    ],
    [
      "a handover relay that is none",
      { handover: { from: ["192.168.100.11"], relay: "some" as "all" } },
      "service.handover.relay: ",
    ],
    [
      "an empty handover list",
      { handover: { acceptFrom: [] } },
      "service.handover.acceptFrom: names no LB node; omit it (got [])",
    ],
    [
      "no pool named where no pool auto-assigns",
      { vipPools: [{ name: "from-a", cidr: "10.1.1.0/24", autoAssign: false }] },
      "service.pool: is unset, and every VIP pool has autoAssign: false (from-a), so the Service would get no address; set pool to one of them, or vips",
    ],
    [
      "no pools",
      { vipPools: [] },
      "service.vipPools: needs the platform's VIP pools (PortableCluster.vipPools) (got [])",
    ],
  ])("rejects %s at preview time", (_what, override, message) => {
    expect(() => new LoadBalancerService("bad", { ...args, ...override })).toThrow(message);
    expect(recorded.filter((r) => r.type === "kubernetes:core/v1:Service")).toEqual([]);
  });
});
