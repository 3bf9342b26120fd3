// The root program's settings, checked in one pass: unknown settings, the environment (kubeconfig
// or lab), every section PortableCluster takes, and the cluster probe, all in one error, before
// anything is registered.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { ConfigError } from "@portable-lb/core";
import { firstTryProblems, firstTrySettings } from "./test/harness/badStackInput.ts";
import { installMocks, settled } from "./test/unit/pulumiMocks.ts";
import { checkStackInput, type Probe } from "./stackInput";

const recorded = installMocks();
const dir = mkdtempSync(join(tmpdir(), "plb-stack-input-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kubeconfig = join(dir, "kubeconfig");
writeFileSync(
  kubeconfig,
  `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://10.0.0.2:6443" } }]
users: [{ name: u, user: {} }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`,
);
const notKubeconfig = join(dir, "hostname");
writeFileSync(notKubeconfig, "myhost\n");

const settings = () => ({
  environment: { kind: "kubeconfig", kubeconfig, bgp: { routers: ["10.0.0.1"] }, lbNodeCount: 3 } as Record<
    string,
    unknown
  >,
  network: {
    nodeCidr: "10.0.0.0/24",
    podCidr: "10.244.0.0/16",
    serviceCidr: "10.96.0.0/16",
    vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
  } as Record<string, unknown>,
  loadBalancer: {
    replicas: 3,
    image: "registry.example/portable-lb/lb:1",
    bgp: { asn: 64512 },
    routeReflectors: [{ node: "rr1", address: "10.0.0.5" }],
  } as Record<string, unknown>,
});
const lab = () => ({
  ...settings(),
  environment: { kind: "lab", lbNodes: 3 } as Record<string, unknown>,
  network: { ...settings().network, nodeCidr: "192.168.100.0/24" },
  loadBalancer: { replicas: 3, dataPlane: { engine: "nftables" }, bgp: { asn: 64512 } } as Record<
    string,
    unknown
  >,
});

const answers: Probe = () => Promise.resolve(undefined);
const silent: Probe = (kc) =>
  Promise.resolve(`environment.kubeconfig: the cluster at ${kc.server} did not answer (x)`);

/** The problems checkStackInput reports for these settings (as the stack holds them: JSON). */
async function problemsOf(values: Record<string, unknown>, probe = answers): Promise<string[]> {
  pulumi.runtime.setAllConfig(
    Object.fromEntries(
      Object.entries(values).map(([k, v]) => [
        `portable-lb:${k}`,
        typeof v === "string" ? v : JSON.stringify(v),
      ]),
    ),
  );
  recorded.length = 0;
  try {
    await checkStackInput(new pulumi.Config("portable-lb"), probe);
    return [];
  } catch (err) {
    expect(pulumi.RunError.isInstance(err)).toBe(true);
    return (err as ConfigError).problems;
  } finally {
    await settled();
    expect(recorded).toEqual([]);
  }
}

describe("checkStackInput", () => {
  it("accepts good settings for a kubeconfig environment and for a lab", async () => {
    expect(await problemsOf(settings())).toEqual([]);
    expect(await problemsOf({ ...lab(), demoApp: { replicas: 2 }, skipAwait: true })).toEqual([]);
  });

  it("reports every mistake of a first try at once, in the user's words", async () => {
    expect(await problemsOf({ ...firstTrySettings(notKubeconfig), demoApp: { replicas: 0 } })).toEqual([
      ...firstTryProblems(notKubeconfig),
      "demoApp.replicas: must be a whole number from 1 to 20 (got 0)",
    ]);
  });

  it("says a missing environment is not set, and still checks the rest", async () => {
    const { network, loadBalancer } = settings();
    expect(await problemsOf({ network, loadBalancer: { ...loadBalancer, replicas: -1 } })).toEqual([
      "environment: is required; run 'pulumi config set --path environment.kind kubeconfig' and 'pulumi config set --path environment.kubeconfig <path>' (not set)",
      "loadBalancer.replicas: must be a whole number from 1 to 100 (got -1)",
    ]);
  });

  it("makes a cluster that does not answer an error in an update, naming the server", async () => {
    expect(await problemsOf(settings(), silent)).toEqual([
      "environment.kubeconfig: the cluster at https://10.0.0.2:6443 did not answer (x)",
    ]);
  });

  it("makes it a warning in a preview", async () => {
    const warn = jest.spyOn(pulumi.log, "warn").mockResolvedValue();
    const dryRun = jest.spyOn(pulumi.runtime, "isDryRun").mockReturnValue(true);
    try {
      expect(await problemsOf(settings(), silent)).toEqual([]);
      expect(warn).toHaveBeenCalledWith(
        "environment.kubeconfig: the cluster at https://10.0.0.2:6443 did not answer (x)",
      );
    } finally {
      warn.mockRestore();
      dryRun.mockRestore();
    }
  });

  it("checks a lab's settings against its plan: its nodes, reflectors and image", async () => {
    const l = lab();
    l.environment.lbnodes = 2;
    l.loadBalancer.replicas = 4;
    expect(await problemsOf(l)).toEqual([
      'environment.lbnodes: is not a known key; did you mean "lbNodes"? (got 2)',
    ]);
    expect(await problemsOf({ ...lab(), loadBalancer: { ...lab().loadBalancer, replicas: 4 } })).toEqual([
      "loadBalancer.replicas: 4 LB pods need 4 LB nodes (one pod per node) but only 3 are labelled; label more nodes or lower replicas (got 4)",
    ]);
  });

  // An aws environment with BGP peers; without them it routes through the route table it makes.
  const aws = () => ({
    ...settings(),
    environment: {
      kind: "aws",
      region: "eu-central-1",
      zones: ["eu-central-1a", "eu-central-1b"],
      apiAccessCidrs: ["203.0.113.0/24"],
      nodes: { lb: 3 },
      bgp: { routers: ["10.0.0.1"] },
    } as Record<string, unknown>,
    network: { ...settings().network, nodeCidr: "10.0.0.0/16" } as Record<string, unknown>,
  });

  it("checks a cloud environment's machines against the cluster's sections", async () => {
    expect(await problemsOf(aws())).toEqual([]);
    const cloudRoutes = aws().environment;
    delete cloudRoutes.bgp;
    const noBgp = {
      ...aws(),
      environment: cloudRoutes,
      loadBalancer: { replicas: 3, image: "registry.example/lb:1" },
    };
    expect(await problemsOf(noBgp)).toEqual([]);
    // The route tables come from the environment; settings it does not make are still checked.
    expect(
      await problemsOf({ ...noBgp, loadBalancer: { ...noBgp.loadBalancer, cloudRoutes: { renewMs: 5000 } } }),
    ).toEqual([
      "loadBalancer.cloudRoutes.renewMs: must be at most half of leaseDurationS (in ms), or a holder could lose its Lease between two renewals (got 5000)",
    ]);
    const a = aws();
    expect(
      await problemsOf({
        ...a,
        environment: { ...a.environment, nodes: { lb: 2 } },
        network: { ...a.network, podCidr: "10.0.128.0/17" },
        flannel: { backend: "host-gw" },
      }),
    ).toEqual([
      'network.podCidr: overlaps network.nodeCidr (10.0.0.0/16); give each network its own addresses (got "10.0.128.0/17")',
      'flannel.backend: host-gw does not work on aws: a cloud gateway sits between the VMs and drops un-encapsulated pod traffic addressed to the overlay network, which it does not know (thesis Table 3.1); use "vxlan" (got "host-gw")',
      "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
    ]);
    expect(await problemsOf({ ...a, network: { ...a.network, nodeCidr: "172.0.0.0/8" } })).toEqual([
      'network.nodeCidr: is the VPC\'s range, and the cloud allows at most a /16; use a /16 or smaller (got "172.0.0.0/8")',
    ]);
  });

  // One per environment field with a range or a set of values.
  it.each<[string, Record<string, unknown>, string]>([
    [
      "kind",
      { kind: "azure" },
      'environment.kind: unknown environment kind; set environment.kind to one of "kubeconfig", "onprem", "aws", "gcp", "lab" (got "azure")',
    ],
    [
      "platform",
      { platform: "azure" },
      'environment.platform: must be one of: onprem, lab, aws, gcp (got "azure")',
    ],
    [
      "lbNodeCount",
      { lbNodeCount: -1 },
      "environment.lbNodeCount: must be a whole number of at least 0 (got -1)",
    ],
    [
      "bgp.routers",
      { bgp: { routers: ["fd00::1"] } },
      'environment.bgp.routers[0]: IPv6 is not supported yet; use an IPv4 address like 10.0.0.1 (got "fd00::1")',
    ],
  ])(
    "names environment.%s of a kubeconfig environment with its value and what it accepts",
    async (_f, change, message) => {
      const s = settings();
      expect(await problemsOf({ ...s, environment: { ...s.environment, ...change } })).toEqual([message]);
    },
  );

  it.each<[string, Record<string, unknown>, string]>([
    ["lbNodes", { lbNodes: 10 }, "environment.lbNodes: must be a whole number from 1 to 9 (got 10)"],
    [
      "workerNodes",
      { workerNodes: 0 },
      "environment.workerNodes: must be a whole number from 1 to 9 (got 0)",
    ],
    ["reflectors", { reflectors: 3 }, "environment.reflectors: must be a whole number from 1 to 2 (got 3)"],
    [
      "apiPort",
      { apiPort: 70000 },
      "environment.apiPort: must be a whole number from 0 to 65535 (got 70000)",
    ],
  ])("names environment.%s of a lab with its value and what it accepts", async (_f, change, message) => {
    const l = lab();
    expect(await problemsOf({ ...l, environment: { ...l.environment, ...change } })).toEqual([message]);
  });
});
