// The provisioning kinds' settings: each bad field is named with its value and its fix, and a good
// one becomes the planned machines (names, roles, zones, fixed addresses) at preview.
import { ConfigError, schemaProblems } from "@portable-lb/core";
import { environmentSchemaWith, planEnvironment, planFacts } from "./environment.ts";
import type { ProvisioningEnvironmentConfig } from "./environment.ts";
import { CLOUD_DSR_BLOCKED } from "./provider.ts";

const schema = environmentSchemaWith();

const aws = () => ({
  kind: "aws",
  region: "eu-central-1",
  zones: ["eu-central-1a", "eu-central-1b"],
  apiAccessCidrs: ["203.0.113.0/24"],
});
const gcp = () => ({
  kind: "gcp",
  project: "my-project-123",
  region: "europe-west4",
  zones: ["europe-west4-a", "europe-west4-b", "europe-west4-c"],
  apiAccessCidrs: ["203.0.113.0/24"],
});
const onprem = () => ({
  kind: "onprem",
  nodes: [
    { name: "cp", host: "cp.example", address: "10.0.0.2", role: "control-plane" },
    { name: "lb-1", host: "lb1.example", address: "10.0.0.11", role: "lb" },
    { name: "lb-2", host: "lb2.example", address: "10.0.0.12", role: "lb" },
  ],
  bgp: { routers: ["10.0.0.1"] },
});

const problemsOf = (input: unknown) => schemaProblems(schema, input, "environment").problems;

function planProblems(env: Record<string, unknown>, nodeCidr: string): string[] {
  const parsed = schemaProblems(schema, env, "environment").data as ProvisioningEnvironmentConfig;
  try {
    planEnvironment(parsed, nodeCidr);
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems;
  }
}

describe("environment kinds", () => {
  it("accepts each kind's smallest good settings, with their defaults", () => {
    expect(problemsOf(aws())).toEqual([]);
    expect(problemsOf(gcp())).toEqual([]);
    expect(problemsOf(onprem())).toEqual([]);
    const parsed = schema.parse(aws());
    expect(parsed).toMatchObject({
      name: "plb",
      instanceType: "t3.medium",
      nodes: { lb: 2, workers: 2 },
      vipPorts: [80, 443],
      vipAccessCidrs: ["0.0.0.0/0"],
      lbTaint: false,
    });
  });

  it("names an unknown kind with every known one", () => {
    expect(problemsOf({ kind: "azure" })).toEqual([
      'environment.kind: unknown environment kind; set environment.kind to one of "kubeconfig", "onprem", "aws", "gcp" (got "azure")',
    ]);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    [
      "an AWS region written the GCP way",
      { ...aws(), region: "eucentral1", zones: ["eucentral1a", "eucentral1b"] },
      ['environment.region: must be an AWS region like us-east-1 or eu-central-1 (got "eucentral1")'],
    ],
    [
      "an AWS zone of another region",
      { ...aws(), zones: ["eu-central-1a", "us-east-1b"] },
      ['environment.zones[1]: must be a zone of region eu-central-1, like eu-central-1a (got "us-east-1b")'],
    ],
    [
      "one AWS zone",
      { ...aws(), zones: ["eu-central-1a"] },
      [
        'environment.zones: needs at least two availability zones, e.g. ["us-east-1a", "us-east-1b"] (got ["eu-central-1a"])',
      ],
    ],
    [
      "a zone twice",
      { ...aws(), zones: ["eu-central-1a", "eu-central-1a"] },
      ['environment.zones[1]: is listed twice; list each zone once (got "eu-central-1a")'],
    ],
    [
      "a GCP zone written the AWS way",
      { ...gcp(), zones: ["europe-west4a", "europe-west4-b"] },
      [
        'environment.zones[0]: must be a zone of region europe-west4, like europe-west4-a (got "europe-west4a")',
      ],
    ],
    [
      "a GCP region written the AWS way",
      { ...gcp(), region: "europe-west-4" },
      ['environment.region: must be a GCP region like us-central1 or europe-west4 (got "europe-west-4")'],
    ],
    [
      "the API open to the world",
      { ...aws(), apiAccessCidrs: ["0.0.0.0/0"] },
      [
        'environment.apiAccessCidrs[0]: would open the Kubernetes API to the whole internet; list the ranges pulumi and kubectl run from, e.g. 203.0.113.0/24 (got "0.0.0.0/0")',
      ],
    ],
    [
      "no LB node",
      { ...aws(), nodes: { lb: 0 } },
      ["environment.nodes.lb: must be a whole number from 1 to 20 (got 0)"],
    ],
    [
      "an AMI that is not one",
      { ...aws(), ami: "debian-12" },
      ['environment.ami: must be an AMI id like ami-0123456789abcdef0 (got "debian-12")'],
    ],
    [
      "a VIP port out of range",
      { ...gcp(), vipPorts: [443, 0] },
      ["environment.vipPorts[1]: must be a whole number from 1 to 65535 (got 0)"],
    ],
  ])("names %s", (_what, env, problems) => {
    expect(problemsOf(env)).toEqual(problems);
  });

  it("names onprem nodes without a control plane, an LB node, or with a repeated address", () => {
    const [cp, lb] = onprem().nodes;
    expect(problemsOf({ ...onprem(), nodes: [lb, { ...lb!, name: "lb-2", host: "x" }] })).toEqual([
      'environment.nodes: needs exactly one node with role control-plane, and has 0; give one node that role (got [{"name":"lb-1","host":"lb1.example","address":"10.0.0.11","role":"lb"},{"name":"lb-2","host":"x","address":"10.0.0.11","role":"lb"}])',
      'environment.nodes[1].address: is also node 0\'s; give each node its own (got "10.0.0.11")',
    ]);
    expect(
      problemsOf({
        ...onprem(),
        nodes: [cp, { ...cp!, name: "w", host: "w", address: "10.0.0.3", role: "worker" }],
      }),
    ).toEqual([expect.stringMatching(/^environment\.nodes: needs at least one node with role lb \(got \[/)]);
  });

  it("takes an onprem node's SSH host key as ssh-keyscan prints it, and names any other", () => {
    const [cp, lb1, lb2] = onprem().nodes;
    const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    expect(problemsOf({ ...onprem(), nodes: [cp, { ...lb1!, hostKey: key }, lb2] })).toEqual([]);
    expect(problemsOf({ ...onprem(), nodes: [cp, { ...lb1!, hostKey: `lb1.example ${key}` }, lb2] })).toEqual(
      [
        `environment.nodes[1].hostKey: must be one public key line as ssh-keyscan prints it, without the host: e.g. ssh-ed25519 AAAA... (got "lb1.example ${key}")`,
      ],
    );
  });
  it("takes the site's machine settings (image mirror, cgroup v1, kubeadm patches), and names bad ones", () => {
    const machines = {
      imageRepository: "registry.example.net:5000/k8s",
      cgroupV1: true,
      kubeadmPatches: "/etc/kubernetes/patches",
    };
    expect(problemsOf({ ...onprem(), machines })).toEqual([]);
    expect(schema.parse(onprem())).toMatchObject({ machines: { cgroupV1: false } });
    expect(
      problemsOf({
        ...onprem(),
        machines: { imageRepository: "https://registry.example.net", kubeadmPatches: "patches" },
      }),
    ).toEqual([
      'environment.machines.imageRepository: must be a registry and optional path, e.g. registry.example.net:5000/k8s (got "https://registry.example.net")',
      'environment.machines.kubeadmPatches: must be an absolute path, e.g. /etc/kubernetes/patches (got "patches")',
    ]);
  });
});

describe("planEnvironment", () => {
  it("spreads AWS machines over one subnet per zone, at fixed addresses", () => {
    const plan = planEnvironment(schema.parse(aws()) as ProvisioningEnvironmentConfig, "10.0.0.0/16");
    expect(plan).toEqual({
      platform: "aws",
      subnets: [
        { zone: "eu-central-1a", cidr: "10.0.0.0/17" },
        { zone: "eu-central-1b", cidr: "10.0.128.0/17" },
      ],
      nodes: [
        { name: "plb-cp", role: "control-plane", address: "10.0.0.10", zone: "eu-central-1a" },
        { name: "plb-lb-1", role: "lb", address: "10.0.128.10", zone: "eu-central-1b" },
        { name: "plb-lb-2", role: "lb", address: "10.0.0.11", zone: "eu-central-1a" },
        { name: "plb-worker-1", role: "worker", address: "10.0.128.11", zone: "eu-central-1b" },
        { name: "plb-worker-2", role: "worker", address: "10.0.0.12", zone: "eu-central-1a" },
      ],
      // No BGP peers: the route table it makes is where cloud-routes writes (its id comes later).
      cloudRoutes: { cloud: "aws" },
    });
    expect(planFacts(plan)).toEqual({
      platform: "aws",
      lbNodeCount: 2,
      cloudRoutes: { cloud: "aws" },
      vipSourcedRepliesDropped: CLOUD_DSR_BLOCKED.aws,
    });
  });

  it("keeps GCP's one regional subnetwork and still spreads the machines over the zones", () => {
    const plan = planEnvironment(schema.parse(gcp()) as ProvisioningEnvironmentConfig, "10.10.0.0/24");
    expect(plan).toMatchObject({
      platform: "gcp",
      subnets: [{ cidr: "10.10.0.0/24" }],
      cloudRoutes: { cloud: "gcp", project: "my-project-123", network: "plb-network" },
    });
    expect(plan.nodes.map((n) => [n.address, n.zone])).toEqual([
      ["10.10.0.10", "europe-west4-a"],
      ["10.10.0.11", "europe-west4-b"],
      ["10.10.0.12", "europe-west4-c"],
      ["10.10.0.13", "europe-west4-a"],
      ["10.10.0.14", "europe-west4-b"],
    ]);
  });

  it("takes onprem machines as given, with the BGP routers", () => {
    const plan = planEnvironment(schema.parse(onprem()) as ProvisioningEnvironmentConfig, "10.0.0.0/24");
    // No worker to run a route reflector on: the user names the nodes (PortableCluster says so).
    expect(planFacts(plan)).toEqual({
      platform: "onprem",
      lbNodeCount: 2,
      bgp: { routers: ["10.0.0.1"] },
      defaultRouteReflectors: [],
    });
    const withWorkers = planEnvironment(
      schema.parse({
        ...onprem(),
        nodes: [
          ...onprem().nodes,
          { name: "w-1", host: "w1.example", address: "10.0.0.21", role: "worker" },
          { name: "w-2", host: "w2.example", address: "10.0.0.22", role: "worker" },
          { name: "w-3", host: "w3.example", address: "10.0.0.23", role: "worker" },
        ],
      }) as ProvisioningEnvironmentConfig,
      "10.0.0.0/24",
    );
    expect(planFacts(withWorkers).defaultRouteReflectors).toEqual([
      { node: "w-1", address: "10.0.0.21" },
      { node: "w-2", address: "10.0.0.22" },
    ]);
  });

  it.each<[string, Record<string, unknown>, string, string[]]>([
    [
      "an AWS VPC larger than AWS allows",
      aws(),
      "10.0.0.0/8",
      [
        'network.nodeCidr: is the VPC\'s range, and the cloud allows at most a /16; use a /16 or smaller (got "10.0.0.0/8")',
      ],
    ],
    [
      "an AWS VPC too small for two zones' subnets",
      aws(),
      "10.0.0.0/28",
      [
        'network.nodeCidr: is too small for 5 machines in 2 zones (a subnet of at least /28 in each); use a /27 or larger (got "10.0.0.0/28")',
      ],
    ],
    [
      "a GCP subnetwork too small for its machines",
      { ...gcp(), nodes: { lb: 4, workers: 8 } },
      "10.10.0.0/28",
      ['network.nodeCidr: is too small for 13 machines; use a /27 or larger (got "10.10.0.0/28")'],
    ],
    [
      "an onprem node outside the node network",
      onprem(),
      "10.0.0.0/29",
      [
        'environment.nodes[1].address: is outside network.nodeCidr 10.0.0.0/29; use the node\'s address on the node network (got "10.0.0.11")',
        'environment.nodes[2].address: is outside network.nodeCidr 10.0.0.0/29; use the node\'s address on the node network (got "10.0.0.12")',
      ],
    ],
  ])("refuses %s", (_what, env, nodeCidr, problems) => {
    expect(planProblems(env, nodeCidr)).toEqual(problems);
  });
});
