// The gcp environment's resource graph under Pulumi's mocks: machines per role, canIpForward on the
// LB nodes only, firewall rules that let the world reach only the VIP ports, service accounts that
// are never the default one, the custom role holding exactly the route permissions, the startup
// script each machine runs, and what the environment hands PortableCluster.
import * as pulumi from "@pulumi/pulumi";
import { GCP_CLOUD_ROUTES_PERMISSIONS } from "@portable-lb/core";
import { secretValue, settled, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import { GCP_API_IP, GCP_PROJECT, installCloudMocks } from "../__fixtures__/cloudMocks.ts";
import { testCredentialsScript } from "../bootstrap/__fixtures__/testCredentials.ts";
import { expectMachinesBootOnce } from "../__fixtures__/machinesBootOnce.ts";
import { clusterPorts } from "../clusterPorts.ts";
import { expectApiServerWait } from "../__fixtures__/apiServerWait.ts";
import { ApiServerReady } from "../apiServer/apiServerReady.ts";
import { gcpEnvironmentSchema } from "../gcpEnvironment.ts";
import { GcpCluster } from "./gcpCluster.ts";

const PROJECT = GCP_PROJECT;
const API_IP = GCP_API_IP;

const recorded = installCloudMocks();

const network = { nodeCidr: "10.10.0.0/24", podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
const environment = (extra: Record<string, unknown> = {}) =>
  gcpEnvironmentSchema.parse({
    kind: "gcp",
    project: PROJECT,
    region: "europe-west4",
    zones: ["europe-west4-a", "europe-west4-b"],
    apiAccessCidrs: ["198.51.100.0/24"],
    nodes: { lb: 2, workers: 1 },
    vipPorts: [443],
    ...extra,
  });

type Inputs = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
const of = (type: string) => recorded.filter((r) => r.type === type);
// In name order (the control plane registers last: it waits for its reserved address).
const instances = () =>
  of("gcp:compute/instance:Instance").sort((a, b) =>
    String(a.inputs.name).localeCompare(String(b.inputs.name)),
  );
const roleOf = (i: { inputs: Inputs }) => i.inputs.labels["portable-lb-role"] as string;
const firewalls = () => of("gcp:compute/firewall:Firewall").map((f) => f.inputs);

async function build(extra: Record<string, unknown> = {}, networkExtra: Record<string, unknown> = {}) {
  recorded.length = 0;
  const cluster = new GcpCluster("plb", {
    environment: environment(extra),
    network: { ...network, ...networkExtra },
  });
  await settled();
  return cluster;
}

describe("GcpCluster (cloud-routes: no BGP peers)", () => {
  let cluster: GcpCluster;
  beforeAll(async () => {
    cluster = await build();
  });

  it("makes a named VPC network with one regional subnetwork on the node network", () => {
    expect(of("gcp:compute/network:Network")[0]!.inputs).toMatchObject({
      name: "plb-network",
      autoCreateSubnetworks: false,
    });
    expect(of("gcp:compute/subnetwork:Subnetwork").map((s) => s.inputs)).toEqual([
      { network: "plb-network-network-id", region: "europe-west4", ipCidrRange: "10.10.0.0/24" },
    ]);
  });

  it("makes the machines per role in their zones at their planned addresses, forwarding on LB nodes only", () => {
    expect(instances().map((i) => [i.inputs.name, roleOf(i), i.inputs.zone])).toEqual([
      ["plb-cp", "control-plane", "europe-west4-a"],
      ["plb-lb-1", "lb", "europe-west4-b"],
      ["plb-lb-2", "lb", "europe-west4-a"],
      ["plb-worker-1", "worker", "europe-west4-b"],
    ]);
    for (const i of instances()) {
      const node = cluster.environment.nodes.find((n) => n.name === i.inputs.name)!;
      expect(i.inputs.networkInterfaces[0].networkIp).toBe(node.address);
      expect(i.inputs.canIpForward).toBe(roleOf(i) === "lb");
      expect(i.inputs.shieldedInstanceConfig.enableSecureBoot).toBe(true);
      expect(i.inputs.metadata).toEqual({ "block-project-ssh-keys": "true" });
    }
    // The control plane's external address is the one reserved (and the kubeconfig's).
    const cp = instances().find((i) => roleOf(i) === "control-plane")!;
    expect(cp.inputs.networkInterfaces[0].accessConfigs).toEqual([{ natIp: API_IP }]);
  });

  it("opens to the world only the VIP ports, on the LB nodes; the cluster's ports only among its machines", () => {
    const rules = firewalls();
    expect(rules.every((r) => r.direction === "INGRESS")).toBe(true);
    const world = rules.filter((r) => (r.sourceRanges as string[] | undefined)?.includes("0.0.0.0/0"));
    expect(world.map((r) => [r.targetTags, r.allows])).toEqual([
      [["plb-lb"], [{ protocol: "tcp", ports: ["443"] }]],
    ]);
    const internal = rules.filter((r) => r.sourceTags !== undefined);
    expect(internal.map((r) => [r.sourceTags, r.targetTags, r.allows])).toEqual([
      [
        ["plb-node"],
        ["plb-node"],
        [
          { protocol: "tcp", ports: ["6443", "10250", "179"] },
          { protocol: "udp", ports: ["8472", "3784-3785"] },
        ],
      ],
    ]);
    expect(clusterPorts()).toHaveLength(5);
    const api = rules.filter((r) => (r.targetTags as string[]).includes("plb-control-plane"));
    expect(api.map((r) => [r.sourceRanges, r.allows])).toEqual([
      [["198.51.100.0/24"], [{ protocol: "tcp", ports: ["6443"] }]],
    ]);
    expect(rules).toHaveLength(3);
    // Each machine carries the tags its rules select.
    expect(instances().map((i) => i.inputs.tags)).toEqual([
      ["plb-node", "plb-control-plane"],
      ["plb-node", "plb-lb"],
      ["plb-node", "plb-lb"],
      ["plb-node"],
    ]);
  });

  it("never uses the default service account; only LB nodes hold the route permissions", () => {
    const accounts = of("gcp:serviceaccount/account:Account").map((a) => a.inputs.accountId);
    expect(accounts).toEqual(["plb-nodes", "plb-lb-nodes"]);
    for (const i of instances())
      expect(i.inputs.serviceAccount.email).toBe(
        `${roleOf(i) === "lb" ? "plb-lb-nodes" : "plb-nodes"}@${PROJECT}.iam.gserviceaccount.com`,
      );
    const [role] = of("gcp:projects/iAMCustomRole:IAMCustomRole");
    expect(role!.inputs.permissions).toEqual([...GCP_CLOUD_ROUTES_PERMISSIONS]);
    expect(role!.inputs.permissions.every((p: string) => p.startsWith("compute.") && !p.includes("*"))).toBe(
      true,
    );
    // Its id ends in a suffix kept in state: GCP holds a deleted role's id for 37 days.
    const [suffix] = of("random:index/randomId:RandomId");
    expect(suffix!.inputs).toEqual({ byteLength: 4 });
    expect(role!.inputs.roleId).toBe("portableLb.plb.cloudRoutes_0a1b2c3d");
    expect(of("gcp:projects/iAMMember:IAMMember").map((m) => m.inputs)).toEqual([
      {
        project: PROJECT,
        role: `projects/${PROJECT}/roles/portableLb.plb.cloudRoutes_0a1b2c3d`,
        member: `serviceAccount:plb-lb-nodes@${PROJECT}.iam.gserviceaccount.com`,
      },
    ]);
  });

  it("runs the shared bootstrap script as each machine's startup script, naming its instance", () => {
    for (const node of cluster.environment.nodes) {
      const instance = instances().find((i) => i.inputs.name === node.name)!;
      expect(secretValue(instance.inputs.metadataStartupScript)).toBe(
        testCredentialsScript(node, {
          providerId: { from: "value", value: `gce://${PROJECT}/${node.zone}/${node.name}` },
          controlPlaneAddress: "10.10.0.10",
          apiServerCertSans: [API_IP],
          network,
        }),
      );
    }
  });

  it("hands PortableCluster the kubeconfig (a secret), the nodes and the network for cloud routes", async () => {
    const env = cluster.environment;
    expect(env).toMatchObject({
      kind: "gcp",
      platform: "gcp",
      lbNodeCount: 2,
      cloudRoutes: { cloud: "gcp", project: PROJECT, network: "plb-network" },
    });
    expect(await pulumi.isSecret(env.kubeconfig)).toBe(true);
    expect(await valueOf(env.kubeconfig)).toContain(`server: https://${API_IP}:6443`);
    // Its objects wait for the API server, which waits for every machine.
    expect(env.dependsOn).toEqual([expect.any(ApiServerReady)]);
    expectApiServerWait(
      recorded,
      instances().map((i) => `plb-${i.inputs.name}-id`),
      await valueOf(env.kubeconfig),
    );
    expect(await typeChain(cluster.firewall)).toBe(
      "portable-lb:providers:GcpCluster$portable-lb:providers:GcpFirewall",
    );
    expect(of("pulumi:providers:gcp")[0]!.inputs).toMatchObject({ project: PROJECT, region: "europe-west4" });
    const gcpResources = recorded.filter((r) => r.type.startsWith("gcp:"));
    for (const r of gcpResources) expect(r.provider).toMatch(/\$pulumi:providers:gcp::plb-gcp::plb-gcp-id$/);
  });
});

describe("GcpCluster (flannel on another VXLAN port)", () => {
  it("opens that port among the machines instead of 8472", async () => {
    await build({}, { flannelVxlanPort: 4790 });
    const internal = firewalls().filter((r) => r.sourceTags !== undefined);
    expect(internal.map((r) => r.allows)).toEqual([
      [
        { protocol: "tcp", ports: ["6443", "10250", "179"] },
        { protocol: "udp", ports: ["4790", "3784-3785"] },
      ],
    ]);
  });
});

describe("GcpCluster (BGP: peers given)", () => {
  it("makes no route role, lets the routers reach BGP and BFD only, and hands over the peers", async () => {
    const cluster = await build({ bgp: { routers: ["10.10.0.1"] } });
    expect(of("gcp:projects/iAMCustomRole:IAMCustomRole")).toEqual([]);
    expect(of("gcp:projects/iAMMember:IAMMember")).toEqual([]);
    expect(instances().every((i) => i.inputs.serviceAccount.email.startsWith("plb-nodes@"))).toBe(true);
    const routers = firewalls().filter((r) =>
      (r.sourceRanges as string[] | undefined)?.includes("10.10.0.1/32"),
    );
    expect(routers.map((r) => [r.targetTags, r.allows])).toEqual([
      [
        ["plb-node"],
        [
          { protocol: "tcp", ports: ["179"] },
          { protocol: "udp", ports: ["3784-3785"] },
        ],
      ],
    ]);
    expect(cluster.environment.bgp).toEqual({ routers: ["10.10.0.1"] });
    expect(cluster.environment.cloudRoutes).toBeUndefined();
  });
});

describe("GcpCluster's machines over time", () => {
  // The control plane too: replacing it for a new script would start an empty cluster.
  it("runs each machine's script once: a new script leaves running machines be, a replacement deletes first", () =>
    expectMachinesBootOnce(
      "gcp:compute/instance:Instance",
      "metadataStartupScript",
      (opts) =>
        new GcpCluster("plb-once", { environment: environment(), network }, opts).environment.nodes.length,
    ));
});
