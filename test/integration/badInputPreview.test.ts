// What a user sees when `pulumi preview` of the root program meets bad input (issue 17), through the
// real engine: every problem at once in the user's words, printed as Pulumi prints its own errors
// (no stack trace, no colour codes), and no resource planned but the stack itself.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { firstTryProblems, firstTrySettings } from "../harness/badStackInput.ts";
import { failedPreview } from "../harness/failedPreview.ts";

const repoRoot = join(__dirname, "..", "..");
const LB_IMAGE = "registry.example.com/portable-lb/lb:1";

/** A network plan with one VIP pool; `extra` is what a case gets wrong. */
const networkPlan = (nodeCidr: string, extra: Record<string, unknown> = {}) => ({
  nodeCidr,
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
  ...extra,
});

/** BGP mode's LB settings with one route reflector. */
const bgpLoadBalancer = (replicas: number, reflector: { node: string; address: string }) => ({
  replicas,
  image: LB_IMAGE,
  bgp: { asn: 64512 },
  routeReflectors: [reflector],
});

describe("pulumi preview of the root program with bad input", () => {
  let dir: string;
  let notKubeconfig: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "plb-bad-input-"));
    notKubeconfig = join(dir, "hostname");
    await writeFile(notKubeconfig, "myhost\n");
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("lists every problem once, without a stack trace, and plans nothing", async () => {
    const { output, diagnostics, planned } = await failedPreview(repoRoot, firstTrySettings(notKubeconfig));
    expect(diagnostics).toEqual([firstTryProblems(notKubeconfig).join("\n")]);
    // Pulumi's own shape for a RunError: no "unhandled exception", no stack frames, no colour codes.
    expect(output).not.toContain("unhandled exception");
    expect(output).not.toMatch(/^\s+at /m);
    expect(output).not.toContain("\u001b[");
    // Only the stack itself (which every new stack plans) is in the plan.
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });
});

describe("pulumi preview of the root program on a cloud with bad input", () => {
  it("checks the cluster against the machines aws would make: VPC overlap, host-gw, LB nodes; plans nothing", async () => {
    const { diagnostics, planned } = await failedPreview(repoRoot, {
      environment: {
        kind: "aws",
        region: "eu-central-1",
        zones: ["eu-central-1a", "eu-central-1b"],
        apiAccessCidrs: ["203.0.113.0/24"],
        nodes: { lb: 2 },
        bgp: { routers: ["10.0.0.1"] },
      },
      network: networkPlan("10.0.0.0/16", { podCidr: "10.0.128.0/17" }),
      loadBalancer: bgpLoadBalancer(3, { node: "plb-worker-1", address: "10.0.128.11" }),
      flannel: { backend: "host-gw" },
    });
    expect(diagnostics).toEqual([
      [
        'network.podCidr: overlaps network.nodeCidr (10.0.0.0/16); give each network its own addresses (got "10.0.128.0/17")',
        'flannel.backend: host-gw does not work on aws: a cloud gateway sits between the VMs and drops un-encapsulated pod traffic addressed to the overlay network, which it does not know (thesis Table 3.1); use "vxlan" (got "host-gw")',
        "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
      ].join("\n"),
    ]);
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });

  it("names each wrong field of a gcp environment with its value and fix; plans nothing", async () => {
    const { diagnostics, planned } = await failedPreview(repoRoot, {
      environment: {
        kind: "gcp",
        project: "My_Project",
        region: "europe-west4",
        zones: ["europe-west4-a", "us-central1-b"],
        apiAccessCidrs: ["0.0.0.0/0"],
      },
      network: networkPlan("10.0.0.0/16"),
      loadBalancer: { replicas: 2, image: LB_IMAGE },
    });
    expect(diagnostics).toEqual([
      [
        'environment.project: must be a GCP project id like my-project-123 (got "My_Project")',
        'environment.apiAccessCidrs[0]: would open the Kubernetes API to the whole internet; list the ranges pulumi and kubectl run from, e.g. 203.0.113.0/24 (got "0.0.0.0/0")',
        'environment.zones[1]: must be a zone of region europe-west4, like europe-west4-a (got "us-central1-b")',
      ].join("\n"),
    ]);
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });
});

describe("pulumi preview of the root program on onprem with bad input", () => {
  it("names the machine SSH cannot reach and the missing key; plans nothing", async () => {
    // A loopback port known to be closed: opened, then closed again.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const { diagnostics, planned } = await failedPreview(repoRoot, {
      environment: {
        kind: "onprem",
        ssh: { port },
        bgp: { routers: ["10.0.0.1"] },
        nodes: [
          { name: "cp", host: "127.0.0.1", address: "10.0.0.10", role: "control-plane" },
          { name: "lb-1", host: "127.0.0.2", address: "10.0.0.11", role: "lb" },
        ],
      },
      network: networkPlan("10.0.0.0/24"),
      loadBalancer: bgpLoadBalancer(1, { node: "lb-1", address: "10.0.0.11" }),
    });
    const unreachable = (i: number, name: string, host: string) =>
      `environment.nodes[${i}].host: node ${name}: SSH at ${host}:${port} did not answer (ECONNREFUSED); check that the machine is up, that sshd listens on environment.ssh.port and that this machine can reach it (got "${host}")`;
    expect(diagnostics).toEqual([
      [
        "sshPrivateKey: is required for an onprem environment: the key that logs in to every machine; run 'pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519' (not set)",
        unreachable(0, "cp", "127.0.0.1"),
        unreachable(1, "lb-1", "127.0.0.2"),
      ].join("\n"),
    ]);
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });
});
