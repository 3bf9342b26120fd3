// Bad input to PortableCluster: every problem reported at once, with the user's own path, the
// value and the fix, as a pulumi.RunError, and nothing registered (the component included).
import * as pulumi from "@pulumi/pulumi";
import { installMocks, settled } from "../../../../test/unit/pulumiMocks.ts";
import type { ClusterEnvironment } from "../environment.ts";
import { bgpArgs, env } from "../testing/clusterArgs.ts";
import { ConfigError } from "../validation.ts";
import { PortableCluster, type PortableClusterArgs } from "./portableCluster.ts";

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

const environment = (extra: Partial<ClusterEnvironment> = {}) =>
  env("onprem", ["10.0.0.1"], { lbNodeCount: 3, ...extra });
const good = (): PortableClusterArgs => ({ ...bgpArgs("onprem"), environment: environment() });
const cloud = (): PortableClusterArgs => ({
  ...good(),
  environment: environment({ platform: "aws", bgp: undefined }),
  loadBalancer: {
    replicas: 2,
    image: "registry.example/portable-lb/lb:1",
    cloudRoutes: { routeTableIds: ["rtb-0abc"] },
  },
});

// Untyped on purpose: these are what a user can write in the stack's config.
type Mutate = (a: any) => void; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The problems PortableCluster reports for `args`, after checking that it registered nothing. */
async function problemsOf(args: PortableClusterArgs): Promise<string[]> {
  let error: unknown;
  try {
    new PortableCluster("plb", args);
  } catch (err) {
    error = err;
  }
  await settled();
  expect(recorded).toEqual([]);
  expect(error).toBeInstanceOf(ConfigError);
  expect(pulumi.RunError.isInstance(error)).toBe(true);
  return (error as ConfigError).problems;
}

describe("PortableCluster's input check", () => {
  it("registers everything when the input is good (the check does not refuse it)", async () => {
    new PortableCluster("plb", good());
    await settled();
    expect(recorded.length).toBeGreaterThan(20);
  });

  // The inputs (#17), each one alone.
  it.each<[string, Mutate, string]>([
    [
      "more LB pods than LB nodes",
      (a) => (a.environment = environment({ lbNodeCount: 2 })),
      "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
    ],
    [
      "a negative BFD interval",
      (a) => (a.loadBalancer.bgp.bfd = { minRxMs: -100 }),
      "loadBalancer.bgp.bfd.minRxMs: must be a whole number from 10 to 10000 (got -100)",
    ],
    [
      "a misspelled dataPlane",
      (a) => (a.loadBalancer.dataplane = { engine: "nftables" }),
      'loadBalancer.dataplane: is not a known key; did you mean "dataPlane"? (got {"engine":"nftables"})',
    ],
    [
      "a misspelled bfd.minRxMs",
      (a) => (a.loadBalancer.bgp.bfd = { minRx: 100 }),
      'loadBalancer.bgp.bfd.minRx: is not a known key; did you mean "minRxMs"? (got 100)',
    ],
    [
      "a misspelled flannel backend",
      (a) => (a.flannel = { backnd: "udp" }),
      'flannel.backnd: is not a known key; did you mean "backend"? (got "udp")',
    ],
    [
      "BGP routing without routers (not set, not [])",
      (a) => (a.environment = environment({ bgp: undefined })),
      "environment.bgp.routers: bgp routing needs at least one upstream router to peer with (not set); add the router addresses your network team gives you",
    ],
    [
      "an IPv6 VIP pool",
      (a) => (a.network.vipPools = [{ name: "web", cidr: "fd00:1::/64" }]),
      'network.vipPools[0].cidr: IPv6 is not supported yet; use an IPv4 prefix like 10.0.0.0/24 (got "fd00:1::/64")',
    ],
    [
      "an IPv6 reflector address",
      (a) => (a.loadBalancer.routeReflectors = [{ node: "rr1", address: "fd00::5" }]),
      'loadBalancer.routeReflectors[0].address: IPv6 is not supported yet; use an IPv4 address like 10.0.0.1 (got "fd00::5")',
    ],
    [
      "a key that is nothing like a known one",
      (a) => (a.network.zzz = 1),
      "network.zzz: is not a known key; use one of: nodeCidr, podCidr, serviceCidr, vipPools (got 1)",
    ],
  ])("rejects %s, before registering anything", async (_what, mutate, message) => {
    const args = good();
    mutate(args);
    expect(await problemsOf(args)).toEqual([message]);
  });

  it("reports every problem of every section in one run, in the order the sections are written", async () => {
    const args = good() as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    args.environment = environment({ lbNodeCount: 2 });
    args.network.serviceCidr = "10.244.128.0/17";
    args.flannel = { backnd: "udp" };
    args.routing = "ospf";
    args.loadBalancer.dataplane = { engine: "nftables" };
    args.loadBalancer.bgp.bfd = { minRxMs: -100, minRx: 5 };
    expect(await problemsOf(args)).toEqual([
      'network.serviceCidr: overlaps network.podCidr (10.244.0.0/16); give each network its own addresses (got "10.244.128.0/17")',
      'flannel.backnd: is not a known key; did you mean "backend"? (got "udp")',
      'routing: must be one of: auto, bgp, cloud-routes (got "ospf")',
      "loadBalancer.bgp.bfd.minRxMs: must be a whole number from 10 to 10000 (got -100)",
      'loadBalancer.bgp.bfd.minRx: is not a known key; did you mean "minRxMs"? (got 5)',
      'loadBalancer.dataplane: is not a known key; did you mean "dataPlane"? (got {"engine":"nftables"})',
      "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
    ]);
  });

  // One per field with a range or a set of values: the path, the value, and the range or values.
  it.each<[string, () => PortableClusterArgs, Mutate, string]>([
    [
      "routing",
      good,
      (a) => (a.routing = "bgpp"),
      'routing: must be one of: auto, bgp, cloud-routes; did you mean "bgp"? (got "bgpp")',
    ],
    [
      "flannel.backend",
      good,
      (a) => (a.flannel = { backend: "geneve" }),
      'flannel.backend: unknown backend; use one of: host-gw, vxlan, wireguard (got "geneve")',
    ],
    [
      "flannel.vxlan.vni",
      cloud,
      (a) => (a.flannel = { vxlan: { vni: 0 } }),
      "flannel.vxlan.vni: must be a whole number from 1 to 16777215 (got 0)",
    ],
    [
      "flannel.vxlan.port",
      cloud,
      (a) => (a.flannel = { vxlan: { port: 70000 } }),
      "flannel.vxlan.port: must be a whole number from 1 to 65535 (got 70000)",
    ],
    [
      "flannel.images.repository",
      good,
      (a) => (a.flannel = { images: { repository: "https://mirror.local/flannel" } }),
      'flannel.images.repository: must be a registry and optional path, e.g. registry.example.net:5000/k8s (got "https://mirror.local/flannel")',
    ],
    [
      "flannel.installCni",
      good,
      (a) => (a.flannel = { installCni: "no" }),
      'flannel.installCni: must be true or false (got "no")',
    ],
    [
      "loadBalancer.replicas",
      good,
      (a) => (a.loadBalancer.replicas = 0),
      "loadBalancer.replicas: must be a whole number from 1 to 100 (got 0)",
    ],
    [
      "loadBalancer.dataPlane.engine",
      good,
      (a) => (a.loadBalancer.dataPlane = { engine: "ipvss" }),
      'loadBalancer.dataPlane.engine: must be one of: auto, ipvs, nftables; did you mean "ipvs"? (got "ipvss")',
    ],
    [
      "loadBalancer.dataPlane.mode (the engine's old place)",
      good,
      (a) => (a.loadBalancer.dataPlane = { mode: "nftables" }),
      'loadBalancer.dataPlane.mode: must be dsr or snat; the engine (auto, ipvs, nftables) is set in dataPlane.engine (got "nftables")',
    ],
    [
      "loadBalancer.dataPlane.scheduler",
      good,
      (a) => (a.loadBalancer.dataPlane = { scheduler: "random" }),
      'loadBalancer.dataPlane.scheduler: must be one of: mh, rr, wrr, lc (got "random")',
    ],
    [
      "loadBalancer.bgp.asn",
      good,
      (a) => (a.loadBalancer.bgp = { asn: 0 }),
      "loadBalancer.bgp.asn: is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294 (got 0)",
    ],
    [
      "loadBalancer.bgp.bfd.minTxMs",
      good,
      (a) => (a.loadBalancer.bgp.bfd = { minTxMs: 20_000 }),
      "loadBalancer.bgp.bfd.minTxMs: must be a whole number from 10 to 10000 (got 20000)",
    ],
    [
      "loadBalancer.bgp.bfd.multiplier",
      good,
      (a) => (a.loadBalancer.bgp.bfd = { multiplier: 1 }),
      "loadBalancer.bgp.bfd.multiplier: must be a whole number from 2 to 255 (got 1)",
    ],
    [
      "loadBalancer.bgp.timers.holdTimeS",
      good,
      (a) => (a.loadBalancer.bgp.timers = { holdTimeS: 70_000 }),
      "loadBalancer.bgp.timers.holdTimeS: must be a whole number from 3 to 65535 (got 70000)",
    ],
    [
      "loadBalancer.bgp.timers.keepaliveS",
      good,
      (a) => (a.loadBalancer.bgp.timers = { keepaliveS: 0 }),
      "loadBalancer.bgp.timers.keepaliveS: must be a whole number from 1 to 21845 (got 0)",
    ],
    [
      "loadBalancer.bgp.gracefulRestartS",
      good,
      (a) => (a.loadBalancer.bgp.gracefulRestartS = 5000),
      "loadBalancer.bgp.gracefulRestartS: must be a whole number from 0 to 4095 (got 5000)",
    ],
    [
      "loadBalancer.bgp.maximumPaths",
      good,
      (a) => (a.loadBalancer.bgp.maximumPaths = 256),
      "loadBalancer.bgp.maximumPaths: must be a whole number from 1 to 255 (got 256)",
    ],
    [
      "loadBalancer.drain.quietS",
      good,
      (a) => {
        a.loadBalancer.dataPlane = { engine: "nftables" };
        a.loadBalancer.drain = { quietS: 0.1 };
      },
      "loadBalancer.drain.quietS: must be a number from 0.5 to 60 (got 0.1)",
    ],
    [
      "loadBalancer.drain.timeoutS",
      good,
      (a) => (a.loadBalancer.drain = { timeoutS: 1.5 }),
      "loadBalancer.drain.timeoutS: must be a whole number from 1 to 3600 (got 1.5)",
    ],
    [
      "loadBalancer.cloudRoutes.cloud",
      cloud,
      (a) => (a.loadBalancer.cloudRoutes.cloud = "azure"),
      'loadBalancer.cloudRoutes.cloud: must match the environment\'s platform aws (got "azure"); drop it or set it to "aws"',
    ],
    [
      "loadBalancer.cloudRoutes.leaseDurationS",
      cloud,
      (a) => (a.loadBalancer.cloudRoutes.leaseDurationS = 100),
      "loadBalancer.cloudRoutes.leaseDurationS: must be a whole number from 2 to 60 (got 100)",
    ],
    [
      "loadBalancer.cloudRoutes.renewMs",
      cloud,
      (a) => (a.loadBalancer.cloudRoutes.renewMs = 50),
      "loadBalancer.cloudRoutes.renewMs: must be a whole number from 100 to 10000 (got 50)",
    ],
    [
      "loadBalancer.cloudRoutes.resyncS",
      cloud,
      (a) => (a.loadBalancer.cloudRoutes.resyncS = 5),
      "loadBalancer.cloudRoutes.resyncS: must be a whole number from 10 to 3600 (got 5)",
    ],
  ])("names %s with its value and what it accepts", async (_field, base, mutate, message) => {
    const args = base();
    mutate(args);
    expect(await problemsOf(args)).toEqual([message]);
  });

  it("takes the route targets the environment made where loadBalancer.cloudRoutes leaves them out", async () => {
    const gcp: PortableClusterArgs = {
      ...cloud(),
      environment: environment({
        platform: "gcp",
        bgp: undefined,
        cloudRoutes: { cloud: "gcp", project: "my-project-123", network: "plb-network" },
      }),
      loadBalancer: { replicas: 2, image: "registry.example/portable-lb/lb:1" },
    };
    const lbCloudRoutes = async (args: PortableClusterArgs) => {
      recorded.length = 0;
      new PortableCluster("plb", args);
      await settled();
      const configMap = recorded.find(
        (r) =>
          r.type === "kubernetes:core/v1:ConfigMap" &&
          r.inputs.metadata.name === "portable-lb-controller-config",
      )!;
      return (JSON.parse(configMap.inputs.data["config.json"] as string) as { cloudRoutes: unknown })
        .cloudRoutes;
    };
    expect(await lbCloudRoutes(gcp)).toMatchObject({
      cloud: "gcp",
      project: "my-project-123",
      network: "plb-network",
    });
    const aws: PortableClusterArgs = {
      ...gcp,
      environment: environment({
        platform: "aws",
        bgp: undefined,
        cloudRoutes: { cloud: "aws", routeTableIds: pulumi.output(["rtb-0def"]) },
      }),
    };
    expect(await lbCloudRoutes(aws)).toMatchObject({ cloud: "aws", routeTableIds: ["rtb-0def"] });
    recorded.length = 0;
    // Without them the fields are still required, and the user's own settings are still checked.
    expect(
      await problemsOf({ ...aws, environment: environment({ platform: "aws", bgp: undefined }) }),
    ).toEqual([
      'loadBalancer.cloudRoutes.routeTableIds: is required with cloud aws: list the VPC route tables your clients\' subnets use, e.g. ["rtb-0123abcd"] (not set)',
    ]);
    expect(
      await problemsOf({
        ...gcp,
        loadBalancer: { ...gcp.loadBalancer, cloudRoutes: { network: "Bad_Net" } },
      }),
    ).toEqual(['loadBalancer.cloudRoutes.network: must be a GCP network name like default (got "Bad_Net")']);
  });
});
