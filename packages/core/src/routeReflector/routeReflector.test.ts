import * as pulumi from "@pulumi/pulumi";
import { installMocks, secretValue, settled, typeChain } from "../../../../test/unit/pulumiMocks.ts";
import { RouteReflector, type RouteReflectorArgs } from "./routeReflector.ts";

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

const args: RouteReflectorArgs = {
  namespace: "portable-lb-system",
  asn: 64512,
  reflectors: [
    { node: "rr1", address: "10.0.0.5" },
    { node: "rr2", address: "10.0.0.6" },
  ],
  speakerRanges: ["10.244.0.0/16"],
  vipPrefixes: ["10.1.1.0/24"],
  upstreamRouters: ["10.0.0.1"],
  image: "registry.example/portable-lb/lb:1",
};

const ofType = (type: string) => recorded.filter((r) => r.type === type);
const birdConf = (i: number): string =>
  (
    secretValue(
      ofType("kubernetes:core/v1:Secret").find((s) => s.inputs.metadata.name === `portable-lb-rr-${i}`)!
        .inputs.stringData,
    ) as Record<string, string>
  )["bird.conf"]!;

describe("RouteReflector", () => {
  it("runs one pinned, host-network BIRD per reflector, each with its own config, under the component", async () => {
    const rr = new RouteReflector("rr", args);
    await settled();
    expect(rr.addresses).toEqual(["10.0.0.5", "10.0.0.6"]);
    const deployments = ofType("kubernetes:apps/v1:Deployment");
    expect(deployments.map((d) => d.inputs.metadata.name)).toEqual(["portable-lb-rr-0", "portable-lb-rr-1"]);
    deployments.forEach((d, i) => {
      const pod = d.inputs.spec.template.spec;
      expect(d.inputs.spec.replicas).toBe(1);
      expect(d.inputs.spec.strategy).toEqual({ type: "Recreate" });
      expect(pod.hostNetwork).toBe(true);
      expect(pod.nodeSelector).toEqual({ "kubernetes.io/hostname": `rr${i + 1}` });
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.containers).toHaveLength(1);
      expect(pod.containers[0].securityContext).toMatchObject({
        privileged: false,
        capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] },
      });
      expect(pod.volumes[0]).toEqual({
        name: "config",
        secret: { secretName: `portable-lb-rr-${i}`, defaultMode: 0o400 },
      });
    });
    for (const r of [...rr.deployments, ...rr.configs, rr.serviceAccount]) {
      expect(await typeChain(r)).toMatch(/^portable-lb:core:RouteReflector\$kubernetes:/);
    }
  });

  it("renders each reflector's BIRD config with its own router id, peering with speakers and routers only", async () => {
    new RouteReflector("rr", args);
    await settled();
    const first = birdConf(0);
    const second = birdConf(1);
    expect(first).toContain("router id 10.0.0.5;");
    expect(second).toContain("router id 10.0.0.6;");
    expect(first).toContain("neighbor range 10.244.0.0/16 internal;");
    expect(first).toContain("define vip_routes = [ 10.1.1.0/24{32,32} ];");
    // Every speaker and router peers with each reflector: a session between the two reflectors would
    // only hand the router every path a second time.
    for (const conf of [first, second]) expect(conf.match(/neighbor \d\S*/g)).toEqual(["neighbor 10.0.0.1"]);
  });

  it("rolls a reflector when its config changes", async () => {
    const hashes = async (a: RouteReflectorArgs) => {
      recorded.length = 0;
      new RouteReflector("rr", a);
      await settled();
      return ofType("kubernetes:apps/v1:Deployment").map(
        (d) => d.inputs.spec.template.metadata.annotations["portable-lb.io/config-hash"],
      );
    };
    const before = await hashes(args);
    const after = await hashes({ ...args, upstreamRouters: ["10.0.0.2"] });
    expect(before[0]).toMatch(/^[0-9a-f]{16}$/);
    expect(after[0]).not.toBe(before[0]);
  });

  it("carries the password only inside the secret config", async () => {
    new RouteReflector("rr", { ...args, password: pulumi.secret("pa55") });
    await settled();
    expect(birdConf(0)).toContain('password "pa55";');
    const plain = JSON.stringify(
      recorded.map((r) => r.inputs),
      (_k, v: unknown) => (secretValue(v) !== undefined ? "[secret]" : v),
    );
    expect(plain).not.toContain("pa55");
  });

  it.each<[string, Partial<RouteReflectorArgs>, string]>([
    [
      "no reflectors",
      { reflectors: [] },
      "routeReflector.reflectors: needs at least one route reflector (two for redundancy), e.g. [{ node: 'rr1', address: '10.0.0.5' }] (got [])",
    ],
    [
      "a shared address",
      {
        reflectors: [
          { node: "a", address: "10.0.0.5" },
          { node: "b", address: "10.0.0.5" },
        ],
      },
      'routeReflector.reflectors[1].address: is already used by reflectors[0]; each reflector needs its own address (got "10.0.0.5")',
    ],
    [
      "no upstream router",
      { upstreamRouters: [] },
      "routeReflector.upstreamRouters: needs at least one upstream router address (got [])",
    ],
    [
      "no VIP pools",
      { vipPrefixes: [] },
      "routeReflector.vipPrefixes: needs the VIP pools, the only prefixes speakers may announce (got [])",
    ],
    [
      "a bad BFD multiplier",
      { bfd: { multiplier: 1 } },
      "routeReflector.bfd.multiplier: must be a whole number from 2 to 255 (got 1)",
    ],
  ])("rejects %s", (_what, override, message) => {
    expect(() => new RouteReflector("bad", { ...args, ...override })).toThrow(message);
  });
});
