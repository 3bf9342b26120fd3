import * as pulumi from "@pulumi/pulumi";
import { installMocks, secretValue, settled, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import type { Platform } from "../platform.ts";
import { bgpArgs, env, network } from "../testing/clusterArgs.ts";
import { PortableCluster, type PortableClusterArgs } from "./portableCluster.ts";

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

/** What each cloud's routes need (the preview checks). */
const CLOUD: Record<"aws" | "gcp", { routeTableIds?: string[]; project?: string; network?: string }> = {
  aws: { routeTableIds: ["rtb-0abc"] },
  gcp: { project: "my-project-123", network: "default" },
};

const ofType = (type: string) => recorded.filter((r) => r.type === type);
const containers = () =>
  ofType("kubernetes:apps/v1:Deployment")
    .find((d) => d.inputs.metadata.name === "portable-lb-controller")!
    .inputs.spec.template.spec.containers.map((c: { name: string }) => c.name);
/** The controller's config, as the LB pods read it. */
const lbConfigJson = () =>
  JSON.parse(
    ofType("kubernetes:core/v1:ConfigMap").find(
      (c) => c.inputs.metadata.name === "portable-lb-controller-config",
    )!.inputs.data["config.json"],
  );
const flannelBackend = () =>
  JSON.parse(
    ofType("kubernetes:core/v1:ConfigMap").find((c) => c.inputs.metadata.name === "kube-flannel-cfg")!.inputs
      .data["net-conf.json"],
  ).Backend.Type;

describe("PortableCluster", () => {
  it.each<[Platform, string]>([
    ["onprem", "host-gw"],
    ["lab", "host-gw"],
    ["aws", "vxlan"],
    ["gcp", "vxlan"],
  ])(
    "on %s with BGP peering: %s flannel, speaker + controller, two reflectors, a router config",
    async (platform, backend) => {
      const cluster = new PortableCluster("plb", bgpArgs(platform));
      await settled();
      expect(cluster.routingMode).toBe("bgp");
      expect(flannelBackend()).toBe(backend);
      expect(containers()).toEqual(["controller", "bgp-speaker"]);
      expect(
        ofType("kubernetes:apps/v1:Deployment")
          .map((d) => d.inputs.metadata.name)
          .sort(),
      ).toEqual(["portable-lb-controller", "portable-lb-rr-0", "portable-lb-rr-1"]);
      const routerConfig = await valueOf(cluster.routerConfig!);
      expect(routerConfig).toContain("router bgp 64512");
      expect(routerConfig).toContain("neighbor 10.0.0.5");
      expect(routerConfig).toContain("neighbor 10.0.0.6");
      expect(routerConfig).toContain("maximum-paths ibgp 16");
      expect(cluster.routerAdvice).toContain("fib_multipath_hash_policy=1");
      expect(await valueOf(cluster.kubeconfig)).toBe("apiVersion: v1\nkind: Config\n");
      expect(await pulumi.isSecret(cluster.kubeconfig)).toBe(true);
      expect(cluster.loadBalancerClass).toBe("portable-lb.io/ecmp");
      expect(cluster.vipPools).toEqual([{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: false }]);
      expect(Object.keys(cluster.stackOutputs())).toEqual([
        "kubeconfig",
        "loadBalancerClass",
        "vipPools",
        "routingMode",
        "routerConfig",
        "routerAdvice",
      ]);
    },
  );

  it("runs the environment's LB image when loadBalancer.image is unset (the lab's build), and needs one", async () => {
    const args = bgpArgs("onprem");
    const noImage = { ...args.loadBalancer, image: undefined };
    new PortableCluster("plb", {
      ...args,
      environment: { ...args.environment, lbImage: "localhost/portable-lb/lb:lab" },
      loadBalancer: noImage,
    });
    await settled();
    const workloads = [
      ...ofType("kubernetes:apps/v1:Deployment"),
      ...ofType("kubernetes:apps/v1:DaemonSet"),
    ].filter((w) => (w.inputs.metadata.name as string).startsWith("portable-lb"));
    const images = workloads.flatMap((w) =>
      (w.inputs.spec.template.spec.containers as { image: string }[]).map((c) => c.image),
    );
    expect(workloads.length).toBeGreaterThanOrEqual(4);
    expect(new Set(images)).toEqual(new Set(["localhost/portable-lb/lb:lab"]));
    expect(() => new PortableCluster("plb-none", { ...args, loadBalancer: noImage })).toThrow(
      "loadBalancer.image: is required, as no public LB image exists; build and push the LB image with 'npm run image -- --push <your-registry>/portable-lb/lb:<tag>'",
    );
  });

  it("takes flannel's mirrors, versions and whether it installs the CNI from the stack", async () => {
    new PortableCluster("plb", {
      ...bgpArgs("onprem"),
      flannel: {
        version: "v0.26.8",
        images: { repository: "mirror.local/flannel", cniPluginRepository: "mirror.local/cni" },
        cniPluginVersion: "v1.6.3-flannel1",
        installCni: false,
      },
    });
    await settled();
    const spec = ofType("kubernetes:apps/v1:DaemonSet").find(
      (d) => d.inputs.metadata.name === "kube-flannel-ds",
    )!.inputs.spec.template.spec;
    expect(spec.containers[0].image).toBe("mirror.local/flannel:v0.26.8");
    expect(spec.initContainers).toEqual([]);
  });

  it.each<Platform>(["aws", "gcp"])(
    "on %s without peering: cloud routes, controller only, no reflectors",
    async (platform) => {
      const cluster = new PortableCluster("plb", {
        environment: env(platform),
        network,
        loadBalancer: {
          replicas: 2,
          image: "registry.example/portable-lb/lb:1",
          cloudRoutes: CLOUD[platform as keyof typeof CLOUD],
        },
      });
      await settled();
      expect(cluster.routingMode).toBe("cloud-routes");
      expect(containers()).toEqual(["controller"]);
      expect(ofType("portable-lb:core:RouteReflector")).toEqual([]);
      expect(cluster.routerConfig).toBeUndefined();
      // No router to configure: its outputs are left out, not exported as undefined.
      expect(Object.keys(cluster.stackOutputs())).toEqual([
        "kubeconfig",
        "loadBalancerClass",
        "vipPools",
        "routingMode",
      ]);
      const config = JSON.parse(
        ofType("kubernetes:core/v1:ConfigMap").find(
          (c) => c.inputs.metadata.name === "portable-lb-controller-config",
        )!.inputs.data["config.json"],
      );
      expect(config.cloudRoutes).toMatchObject({ cloud: platform, ...CLOUD[platform as keyof typeof CLOUD] });
    },
  );

  it.each<[Platform, Record<string, unknown>, string]>([
    [
      "aws",
      {},
      'loadBalancer.cloudRoutes.routeTableIds: is required with cloud aws: list the VPC route tables your clients\' subnets use, e.g. ["rtb-0123abcd"] (not set)',
    ],
    [
      "aws",
      { routeTableIds: [] },
      'loadBalancer.cloudRoutes.routeTableIds: is required with cloud aws: list the VPC route tables your clients\' subnets use, e.g. ["rtb-0123abcd"] (got [])',
    ],
    [
      "gcp",
      { network: "default" },
      'loadBalancer.cloudRoutes.project: is required with cloud gcp: set the id of the project holding the VPC network (a Shared VPC\'s host project), e.g. "my-project-123" (not set)',
    ],
    [
      "gcp",
      { project: "my-project-123" },
      'loadBalancer.cloudRoutes.network: is required with cloud gcp: set the VPC network the LB instances are in, e.g. "default" (not set)',
    ],
    [
      "aws",
      { cloud: "gcp", routeTableIds: ["rtb-0abc"] },
      'loadBalancer.cloudRoutes.cloud: must match the environment\'s platform aws (got "gcp"); drop it or set it to "aws"',
    ],
  ])("on %s, cloud routes with %j fail at preview naming the field", async (platform, cloudRoutes, error) => {
    expect(
      () =>
        new PortableCluster("plb", {
          environment: env(platform),
          network,
          loadBalancer: {
            replicas: 2,
            image: "registry.example/portable-lb/lb:1",
            cloudRoutes,
          },
        }),
    ).toThrow(error);
    await settled();
    expect(ofType("portable-lb:core:LoadBalancer")).toEqual([]);
  });

  it.each<[string, "dsr" | "snat" | undefined, "dsr" | undefined, string]>([
    ["an environment defaulting to DSR (onprem)", undefined, "dsr", "dsr"],
    ["the user's snat over that default", "snat", "dsr", "snat"],
    ["an environment without a default", undefined, undefined, "snat"],
  ])("forwards by the mode the user or the environment says: %s", async (_what, mode, fallback, expected) => {
    const args = bgpArgs("onprem");
    if (mode) args.loadBalancer.dataPlane = { mode };
    if (fallback) args.environment = { ...args.environment, defaultForwarding: fallback };
    new PortableCluster("plb", args);
    await settled();
    const config = lbConfigJson();
    expect(config.dataPlane.mode).toBe(expected);
  });

  it.each<[string, boolean | undefined, boolean | undefined, boolean]>([
    ["an environment that made the cluster (its default: on)", undefined, true, true],
    ["the user's choice over that default", false, true, false],
    ["an existing cluster (no default: off)", undefined, undefined, false],
    ["the user's choice on an existing cluster", true, undefined, true],
  ])(
    "serves classless Services as the user or the environment says: %s",
    async (_what, chosen, byDefault, expected) => {
      const args = bgpArgs("onprem");
      if (chosen !== undefined) args.loadBalancer.serveClassless = chosen;
      if (byDefault !== undefined)
        args.environment = { ...args.environment, servesClasslessByDefault: byDefault };
      new PortableCluster("plb", args);
      await settled();
      expect(lbConfigJson().serveClassless).toBe(expected);
    },
  );

  it.each<[string, boolean, string[]]>([
    ["the environment's nodes where the user names none", false, ["worker-1", "worker-2"]],
    ["the user's nodes over the environment's", true, ["rr1", "rr2"]],
  ])("runs the route reflectors on %s", async (_what, named, expected) => {
    const args = bgpArgs("onprem");
    if (!named) delete args.loadBalancer.routeReflectors;
    args.environment = {
      ...args.environment,
      defaultRouteReflectors: [
        { node: "worker-1", address: "10.0.0.21" },
        { node: "worker-2", address: "10.0.0.22" },
      ],
    };
    new PortableCluster("plb", args);
    await settled();
    const pinned = ofType("kubernetes:apps/v1:Deployment")
      .filter((d) => String(d.inputs.metadata.name).startsWith("portable-lb-rr-"))
      .map((d) => d.inputs.spec.template.spec.nodeSelector["kubernetes.io/hostname"]);
    expect(pinned).toEqual(expected);
    // The speakers peer with exactly those.
    expect(lbConfigJson().bgp.routeReflectors).toEqual(
      named ? ["10.0.0.5", "10.0.0.6"] : ["10.0.0.21", "10.0.0.22"],
    );
  });

  it("refuses DSR where the environment knows its network drops replies from the VIP, naming why", async () => {
    const args = bgpArgs("aws");
    args.loadBalancer.dataPlane = { mode: "dsr" };
    args.environment = { ...args.environment, vipSourcedRepliesDropped: "the machines keep their checks" };
    expect(() => new PortableCluster("plb", args)).toThrow(
      'loadBalancer.dataPlane.mode: dsr cannot work here: the machines keep their checks; use snat (got "dsr")',
    );
    // SNAT there, and DSR where nothing is known against it, are accepted.
    args.loadBalancer.dataPlane = { mode: "snat" };
    expect(() => new PortableCluster("plb-snat", args)).not.toThrow();
    const existing = bgpArgs("aws");
    existing.loadBalancer.dataPlane = { mode: "dsr" };
    expect(() => new PortableCluster("plb-existing", existing)).not.toThrow();
    await settled();
  });

  it("names the missing route reflectors when the environment has no node for them either", () => {
    const args = bgpArgs("onprem");
    delete args.loadBalancer.routeReflectors;
    args.environment = { ...args.environment, defaultRouteReflectors: [] };
    expect(() => new PortableCluster("plb", args)).toThrow(
      "loadBalancer.routeReflectors: bgp routing needs at least one route reflector, and the environment has no worker node to run one on; add workers or name the nodes, e.g. [{ node: 'rr1', address: '10.0.0.5' }] (not set)",
    );
  });

  it("passes the drain settings to the LB pods and sizes their grace period from them", async () => {
    const args = bgpArgs("onprem");
    args.loadBalancer.drain = { timeoutS: 120 };
    new PortableCluster("plb", args);
    await settled();
    const config = lbConfigJson();
    expect(config.drain).toEqual({ quietS: 3, timeoutS: 120 });
    const lb = ofType("kubernetes:apps/v1:Deployment").find(
      (d) => d.inputs.metadata.name === "portable-lb-controller",
    )!;
    expect(lb.inputs.spec.template.spec.terminationGracePeriodSeconds).toBe(145);
  });

  it("creates its Kubernetes provider from the kubeconfig and every child under the component, through that provider", async () => {
    const cluster = new PortableCluster("plb", bgpArgs("onprem"));
    await settled();
    const provider = ofType("pulumi:providers:kubernetes");
    expect(provider).toHaveLength(1);
    expect(secretValue(provider[0]!.inputs.kubeconfig)).toBe("apiVersion: v1\nkind: Config\n");
    for (const c of [cluster.provider, cluster.flannel, cluster.loadBalancer, cluster.routeReflector!]) {
      expect(await typeChain(c)).toMatch(/^portable-lb:core:PortableCluster\$/);
    }
    const k8sResources = recorded.filter((r) => r.type.startsWith("kubernetes:"));
    expect(k8sResources.length).toBeGreaterThan(15);
    for (const r of k8sResources) expect(r.provider).toMatch(/::plb-k8s::/);
  });

  it("names its cluster to the provider when the environment gives an identity, and only then", async () => {
    const args = bgpArgs("onprem");
    new PortableCluster("plb", {
      ...args,
      environment: { ...args.environment, clusterIdentifier: "lab/plb" },
    });
    new PortableCluster("plain", bgpArgs("onprem"));
    await settled();
    const providers = ofType("pulumi:providers:kubernetes");
    expect(providers.map((p) => [p.name, p.inputs.clusterIdentifier]).sort()).toEqual([
      ["plain-k8s", undefined],
      ["plb-k8s", "lab/plb"],
    ]);
  });

  it("lets the reflectors accept speakers from the pod network and, masqueraded by flannel, the node network", async () => {
    new PortableCluster("plb", bgpArgs("onprem"));
    await settled();
    const configs = ofType("kubernetes:core/v1:Secret").filter((c) =>
      String(c.inputs.metadata.name).startsWith("portable-lb-rr-"),
    );
    expect(configs.length).toBeGreaterThan(0);
    for (const c of configs) {
      const conf = (secretValue(c.inputs.stringData) as Record<string, string>)["bird.conf"];
      expect(conf).toContain(`neighbor range ${network.podCidr} internal;`);
      expect(conf).toContain(`neighbor range ${network.nodeCidr} internal;`);
    }
  });

  it("keeps the BGP password secret in the router config and out of every plain input", async () => {
    const args = bgpArgs("onprem");
    args.loadBalancer.bgp = { asn: 64512, password: pulumi.secret("hunter2") };
    const cluster = new PortableCluster("plb", args);
    await settled();
    expect(await pulumi.isSecret(cluster.routerConfig!)).toBe(true);
    expect(await valueOf(cluster.routerConfig!)).toContain("hunter2");
    for (const r of recorded) {
      const plain = JSON.stringify(r.inputs, (_k, v: unknown) =>
        secretValue(v) !== undefined ? "[secret]" : v,
      );
      expect(plain).not.toContain("hunter2");
    }
  });

  const bad: [string, (a: PortableClusterArgs) => void, string][] = [
    [
      "pod and service CIDRs overlap",
      (a) => (a.network = { ...network, serviceCidr: "10.244.128.0/17" }),
      'network.serviceCidr: overlaps network.podCidr (10.244.0.0/16); give each network its own addresses (got "10.244.128.0/17")',
    ],
    [
      "a VIP pool inside the node network",
      (a) => (a.network = { ...network, vipPools: [{ name: "web", cidr: "10.0.0.128/25" }] }),
      'network.vipPools[0].cidr: overlaps network.nodeCidr (10.0.0.0/24); give each network its own addresses (got "10.0.0.128/25")',
    ],
    [
      "a VIP pool inside the service network",
      (a) => (a.network = { ...network, vipPools: [{ name: "web", cidr: "10.96.5.0/24" }] }),
      'network.vipPools[0].cidr: overlaps network.serviceCidr (10.96.0.0/16); give each network its own addresses (got "10.96.5.0/24")',
    ],
    [
      "BGP mode without upstream routers",
      (a) => (a.environment = env("onprem")),
      "environment.bgp.routers: bgp routing needs at least one upstream router to peer with (not set); add the router addresses your network team gives you",
    ],
    [
      "cloud routes on premises",
      (a) => (a.routing = "cloud-routes"),
      'routing: cloud-routes needs a cloud route table, which a onprem environment does not have (got "cloud-routes"); use "bgp" and set environment.bgp.routers',
    ],
    [
      "BGP without an ASN",
      (a) => (a.loadBalancer.bgp = undefined),
      "loadBalancer.bgp.asn: is required for bgp routing; use a private ASN in 64512-65534 or 4200000000-4294967294 (not set)",
    ],
    [
      "an ASN out of range",
      (a) => (a.loadBalancer.bgp = { asn: 99999999999 }),
      "loadBalancer.bgp.asn: is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294 (got 99999999999)",
    ],
    [
      "BGP without route reflectors",
      (a) => (a.loadBalancer.routeReflectors = []),
      "loadBalancer.routeReflectors: needs at least one route reflector (two for redundancy), e.g. [{ node: 'rr1', address: '10.0.0.5' }] (got [])",
    ],
    [
      "two reflectors on one node",
      (a) =>
        (a.loadBalancer.routeReflectors = [
          { node: "n", address: "10.0.0.5" },
          { node: "n", address: "10.0.0.6" },
        ]),
      'loadBalancer.routeReflectors[1].node: is already used by reflectors[0]; run each reflector on its own node (got "n")',
    ],
    [
      "a reflector off the node network",
      (a) => (a.loadBalancer.routeReflectors = [{ node: "rr1", address: "10.244.1.5" }]),
      'loadBalancer.routeReflectors[0].address: is outside network.nodeCidr 10.0.0.0/24, so the upstream router cannot reach it (got "10.244.1.5"); use the node\'s address on the node network',
    ],
    [
      "more LB pods than LB nodes",
      (a) => (a.environment = env("onprem", ["10.0.0.1"], { lbNodeCount: 2 })),
      "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
    ],
    [
      "host-gw in a cloud",
      (a) => {
        a.environment = env("aws", ["10.0.0.1"]);
        a.flannel = { backend: "host-gw" };
      },
      'flannel.backend: host-gw does not work on aws: a cloud gateway sits between the VMs and drops un-encapsulated pod traffic addressed to the overlay network, which it does not know (thesis Table 3.1); use "vxlan" (got "host-gw")',
    ],
  ];
  it.each(bad)("rejects %s at preview time with field, value and fix", (_what, mutate, message) => {
    const args = bgpArgs("onprem");
    mutate(args);
    let error: Error | undefined;
    try {
      new PortableCluster(`bad-${Math.random()}`, args);
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toBe(message);
  });
});
