// The aws and gcp examples as a user runs them, under Pulumi's mocks: the stack config reaches the
// cluster (machines per role), the LB nodes forward (sourceDestCheck off, canIpForward on), the
// VIP ports are open to the network's own range only, PortableCluster waits for the API server, and
// the route targets the cloud made reach the LB's config.
import * as pulumi from "@pulumi/pulumi";
import { expectApiServerWait } from "../packages/providers/src/__fixtures__/apiServerWait.ts";
import {
  AWS_ROUTE_TABLE_ID,
  GCP_PROJECT,
  installCloudMocks,
} from "../packages/providers/src/__fixtures__/cloudMocks.ts";
import { secretValue, settled, type RecordedResource } from "../test/unit/pulumiMocks.ts";

const recorded = installCloudMocks();
const LB_IMAGE = "registry.example.com/portable-lb/lb:1";

type Inputs = RecordedResource["inputs"];
interface Machine {
  name: string;
  role: string;
  /** Whether the machine forwards traffic addressed to others (VIP traffic). */
  forwards: boolean;
}

/** The machines of a cloud's instance type, their role and whether they forward, from their inputs. */
function machinesOf(type: string, role: (i: Inputs) => string, forwards: (i: Inputs) => boolean) {
  return (): Machine[] =>
    of(type).map((i) => ({ name: i.name, role: role(i.inputs), forwards: forwards(i.inputs) }));
}

const examples = {
  aws: {
    config: { region: "eu-central-1", zones: ["eu-central-1a", "eu-central-1b"] },
    // The control plane sits on its own interface, whose check stays on (AWS's default).
    machines: machinesOf(
      "aws:ec2/instance:Instance",
      (i) => i.tags["portable-lb.io/role"],
      (i) => i.sourceDestCheck === false,
    ),
    /** Who may reach each VIP port, from the security group rules. */
    vipPortSources: () =>
      of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        .map((r) => r.inputs)
        .filter((r) => r.securityGroupId === "plb-firewall-lb-nodes-id")
        .map((r) => [r.fromPort as number, r.cidrIpv4 as string]),
    worldOpen: () =>
      of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").filter(
        (r) => r.inputs.cidrIpv4 === "0.0.0.0/0",
      ),
    routeTargets: { cloud: "aws", routeTableIds: [AWS_ROUTE_TABLE_ID] },
  },
  gcp: {
    config: { project: GCP_PROJECT, region: "europe-west4", zones: ["europe-west4-a", "europe-west4-b"] },
    machines: machinesOf(
      "gcp:compute/instance:Instance",
      (i) => i.labels["portable-lb-role"],
      (i) => i.canIpForward === true,
    ),
    vipPortSources: () =>
      of("gcp:compute/firewall:Firewall")
        .map((r) => r.inputs)
        .filter((r) => (r.targetTags as string[] | undefined)?.includes("plb-lb"))
        .flatMap((r) =>
          (r.allows as { ports: string[] }[]).flatMap((a) =>
            a.ports.flatMap((p) => (r.sourceRanges as string[]).map((s) => [Number(p), s])),
          ),
        ),
    worldOpen: () =>
      of("gcp:compute/firewall:Firewall").filter((r) =>
        (r.inputs.sourceRanges as string[] | undefined)?.includes("0.0.0.0/0"),
      ),
    routeTargets: { cloud: "gcp", project: GCP_PROJECT, network: "plb-network" },
  },
};

function of(type: string): RecordedResource[] {
  return recorded.filter((r) => r.type === type);
}

describe.each(["aws", "gcp"] as const)("examples/%s", (cloud) => {
  const example = examples[cloud];
  let outputs: Record<string, unknown>;
  beforeAll(async () => {
    recorded.length = 0;
    const config = {
      ...example.config,
      apiAccessCidrs: ["198.51.100.0/24"],
      nodes: { lb: 3, workers: 1 },
      lbImage: LB_IMAGE,
    };
    pulumi.runtime.setAllConfig(
      Object.fromEntries(
        Object.entries(config).map(([k, v]) => [
          `${pulumi.getProject()}:${k}`,
          typeof v === "string" ? v : JSON.stringify(v),
        ]),
      ),
    );
    outputs = (await import(`./${cloud}/index.ts`)) as Record<string, unknown>;
    await settled();
  });

  it("makes the machines the stack config asks for, and only the LB nodes forward", () => {
    const machines = example.machines();
    const byRole = (role: string) => machines.filter((m) => m.role === role);
    expect(byRole("control-plane")).toHaveLength(1);
    expect(byRole("lb")).toHaveLength(3);
    expect(byRole("worker")).toHaveLength(1);
    expect(machines).toHaveLength(5);
    for (const m of machines) expect([m.name, m.forwards]).toEqual([m.name, m.role === "lb"]);
    // The planned machines, as the stack outputs them, are the ones made.
    const planned = (outputs.nodes as { name: string; role: string }[]).map((n) => `${n.role} plb-${n.name}`);
    expect(planned.sort()).toEqual(machines.map((m) => `${m.role} ${m.name}`).sort());
  });

  it("opens the VIP ports to the network's own range only, and nothing to the world", () => {
    expect(example.vipPortSources().sort(([a], [b]) => Number(a) - Number(b))).toEqual([
      [80, network(cloud)],
      [443, network(cloud)],
    ]);
    expect(example.worldOpen()).toEqual([]);
  });

  it("runs one LB pod per LB node, routing VIPs through the route targets the cloud made", () => {
    const lbConfig = JSON.parse(
      of("kubernetes:core/v1:ConfigMap").find(
        (r) => r.inputs.metadata.name === "portable-lb-controller-config",
      )!.inputs.data["config.json"] as string,
    ) as Inputs;
    expect(lbConfig.routingMode).toBe("cloud-routes");
    expect(lbConfig.cloudRoutes).toMatchObject(example.routeTargets);
    expect(lbConfig.vipPools).toEqual([{ name: "web", cidr: "10.200.0.0/24", avoidBuggyIps: false }]);
    const deployment = of("kubernetes:apps/v1:Deployment").find(
      (d) => d.inputs.metadata.name === "portable-lb-controller",
    )!;
    expect(deployment.inputs.spec.replicas).toBe(3);
    expect(deployment.inputs.spec.template.spec.containers[0].image).toBe(LB_IMAGE);
  });

  it("applies nothing before the API server is ready, with the cluster's kubeconfig (a secret)", async () => {
    const [provider] = of("pulumi:providers:kubernetes");
    const kubeconfig = secretValue(provider!.inputs.kubeconfig) as string;
    expect(kubeconfig).toContain("client-certificate-data");
    expectApiServerWait(
      recorded,
      example.machines().map((m) => `${m.name}-id`),
      kubeconfig,
    );
    expect(await pulumi.isSecret(outputs.kubeconfig as pulumi.Output<string>)).toBe(true);
    expect(outputs.routingMode).toBe("cloud-routes");
  });
});

function network(cloud: "aws" | "gcp"): string {
  return cloud === "aws" ? "10.0.0.0/16" : "10.0.0.0/20";
}
