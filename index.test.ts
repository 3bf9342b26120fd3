// The root program with `environment.kind` aws, gcp and onprem, under Pulumi's mocks: the stack's settings
// provision the cluster through @portable-lb/providers, and PortableCluster gets its facts (the
// kubeconfig as a secret, the LB nodes, the cloud's route targets or the BGP peers) and waits for
// its API server. onprem's machines are bootstrapped over SSH, and named at preview when SSH cannot
// reach them.
import { createServer, type AddressInfo, type Server } from "node:net";
import * as pulumi from "@pulumi/pulumi";
import { CLOUD_DSR_BLOCKED, SSH_KEY_REQUIRED } from "@portable-lb/providers";
import { expectApiServerWait } from "./packages/providers/src/__fixtures__/apiServerWait.ts";
import {
  AWS_API_IP,
  AWS_ROUTE_TABLE_ID,
  GCP_API_IP,
  GCP_PROJECT,
  installCloudMocks,
} from "./packages/providers/src/__fixtures__/cloudMocks.ts";
import { secretValue, settled } from "./test/unit/pulumiMocks.ts";

const recorded = installCloudMocks();

const network = {
  nodeCidr: "10.0.0.0/16",
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [{ name: "web", cidr: "10.200.0.0/24" }],
};
const common = { apiAccessCidrs: ["198.51.100.0/24"], nodes: { lb: 3, workers: 2 } };
const environments = {
  aws: { kind: "aws", region: "eu-central-1", zones: ["eu-central-1a", "eu-central-1b"], ...common },
  gcp: {
    kind: "gcp",
    project: GCP_PROJECT,
    region: "europe-west4",
    zones: ["europe-west4-a", "europe-west4-b"],
    ...common,
  },
};
const image = "registry.example.com/portable-lb/lb:1";
/** BGP mode's LB settings with one route reflector. */
const bgpLoadBalancer = (reflector: { node: string; address: string }, replicas = 3) => ({
  replicas,
  image,
  bgp: { asn: 64512 },
  routeReflectors: [reflector],
});

type Outputs = Record<string, unknown>;

/** Runs the root program with these settings; resolves to its outputs once everything registered. */
async function runProgram(settings: Record<string, unknown>): Promise<Outputs> {
  recorded.length = 0;
  pulumi.runtime.setAllConfig(
    Object.fromEntries(
      Object.entries(settings).map(([k, v]) => [
        `portable-lb:${k}`,
        typeof v === "string" ? v : JSON.stringify(v),
      ]),
    ),
  );
  const main = (await import("./index.ts")) as unknown as { default: () => Promise<Outputs> };
  const outputs = await main.default();
  await settled();
  return outputs;
}

type Inputs = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
const of = (type: string) => recorded.filter((r) => r.type === type);
const lbConfig = () =>
  JSON.parse(
    of("kubernetes:core/v1:ConfigMap").find(
      (r) => r.inputs.metadata.name === "portable-lb-controller-config",
    )!.inputs.data["config.json"] as string,
  ) as Inputs;
const machines = {
  aws: () =>
    of("aws:ec2/instance:Instance").map((i) => ({
      name: i.name,
      role: i.inputs.tags["portable-lb.io/role"],
    })),
  gcp: () =>
    of("gcp:compute/instance:Instance").map((i) => ({
      name: i.name,
      role: i.inputs.labels["portable-lb-role"],
    })),
};

describe.each(["aws", "gcp"] as const)("the root program on %s", (cloud) => {
  let outputs: Outputs;
  beforeAll(async () => {
    outputs = await runProgram({
      environment: environments[cloud],
      network,
      loadBalancer: { replicas: 3, image },
    });
  });

  it("provisions one control plane, the LB nodes and the workers through the cloud's component", () => {
    const counts = machines[cloud]().reduce<Record<string, number>>(
      (n, m) => ({ ...n, [m.role as string]: (n[m.role as string] ?? 0) + 1 }),
      {},
    );
    expect(counts).toEqual({ "control-plane": 1, lb: 3, worker: 2 });
    const component =
      cloud === "aws" ? "portable-lb:providers:AwsCluster" : "portable-lb:providers:GcpCluster";
    expect(of(component).map((c) => c.name)).toEqual(["plb"]);
    // Its machines as planned, for the user's routeReflectors.
    expect((outputs.nodes as { role: string }[]).map((n) => n.role)).toEqual([
      "control-plane",
      "lb",
      "lb",
      "lb",
      "worker",
      "worker",
    ]);
  });

  it("gives PortableCluster the cluster's kubeconfig as a secret, and a wait for its API server", async () => {
    const [provider] = of("pulumi:providers:kubernetes");
    const kubeconfig = secretValue(provider!.inputs.kubeconfig) as string;
    expect(kubeconfig).toContain(`server: https://${cloud === "aws" ? AWS_API_IP : GCP_API_IP}:6443`);
    expect(await pulumi.isSecret(outputs.kubeconfig as pulumi.Output<string>)).toBe(true);
    expectApiServerWait(
      recorded,
      machines[cloud]().map((m) => `${m.name}-id`),
      kubeconfig,
    );
  });

  it("routes the VIPs through the cloud's route targets the environment made, on its 3 LB nodes", () => {
    expect(lbConfig().routingMode).toBe("cloud-routes");
    expect(lbConfig().cloudRoutes).toMatchObject(
      cloud === "aws"
        ? { cloud: "aws", routeTableIds: [AWS_ROUTE_TABLE_ID] }
        : { cloud: "gcp", project: GCP_PROJECT, network: "plb-network" },
    );
    const deployment = of("kubernetes:apps/v1:Deployment").find(
      (d) => d.inputs.metadata.name === "portable-lb-controller",
    )!;
    expect(deployment.inputs.spec.replicas).toBe(3);
  });
});

describe("the root program on aws with BGP peers", () => {
  it("hands PortableCluster the routers, and the user's reflectors on the planned workers", async () => {
    const outputs = await runProgram({
      environment: { ...environments.aws, bgp: { routers: ["10.0.0.1"] } },
      network,
      loadBalancer: bgpLoadBalancer({ node: "plb-worker-1", address: "10.0.0.12" }),
    });
    expect(lbConfig().routingMode).toBe("bgp");
    // BGP, but a cloud: no default of DSR (its gateways drop the VIP-sourced replies).
    expect(lbConfig().dataPlane.mode).toBe("snat");
    expect(outputs.routingMode).toBe("bgp");
    expect(of("aws:iam/role:Role")).toEqual([]);
    const routerConfig = await new Promise<string>((r) =>
      (outputs.routerConfig as pulumi.Output<string>).apply(r),
    );
    expect(routerConfig).toContain("neighbor 10.0.0.12 peer-group portable-lb-reflectors");
  });

  it("runs the route reflectors on the first two planned workers when the user names none", async () => {
    const loadBalancer: Partial<ReturnType<typeof bgpLoadBalancer>> = bgpLoadBalancer({
      node: "unused",
      address: "10.0.0.99",
    });
    delete loadBalancer.routeReflectors;
    const outputs = await runProgram({
      environment: { ...environments.aws, bgp: { routers: ["10.0.0.1"] } },
      network,
      loadBalancer,
    });
    const workers = (outputs.nodes as { name: string; role: string; address: string }[]).filter(
      (n) => n.role === "worker",
    );
    expect(workers).toHaveLength(2);
    const pinned = of("kubernetes:apps/v1:Deployment")
      .filter((d) => String(d.inputs.metadata.name).startsWith("portable-lb-rr-"))
      .map((d) => d.inputs.spec.template.spec.nodeSelector["kubernetes.io/hostname"]);
    expect(pinned).toEqual(workers.map((w) => w.name));
    expect(lbConfig().bgp.routeReflectors).toEqual(workers.map((w) => w.address));
  });

  it("opens flannel's VXLAN port as the stack's flannel settings give it in the cloud's firewall", async () => {
    await runProgram({
      environment: { ...environments.aws, bgp: { routers: ["10.0.0.1"] } },
      network,
      flannel: { vxlan: { port: 4790 } },
      loadBalancer: bgpLoadBalancer({ node: "plb-worker-1", address: "10.0.0.12" }),
    });
    const vxlan = of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").filter(
      (r) => r.inputs.description === "flannel's VXLAN",
    );
    expect(vxlan.map((r) => [r.inputs.fromPort, r.inputs.toPort])).toEqual([[4790, 4790]]);
  });

  it("fails DSR at preview: the cluster's own machines drop replies sent from the VIP", async () => {
    await expect(
      runProgram({
        environment: { ...environments.aws, bgp: { routers: ["10.0.0.1"] } },
        network,
        loadBalancer: {
          ...bgpLoadBalancer({ node: "plb-worker-1", address: "10.0.0.12" }),
          dataPlane: { mode: "dsr" },
        },
      }),
    ).rejects.toThrow(
      `loadBalancer.dataPlane.mode: dsr cannot work here: ${CLOUD_DSR_BLOCKED.aws}; use snat (got "dsr")`,
    );
    expect(of("aws:ec2/instance:Instance")).toEqual([]);
  });
});

describe("the root program on onprem", () => {
  // Loopback stand-ins for the machines' sshd: the preview only asks whether the port accepts.
  const servers: Server[] = [];
  let port = 0;
  beforeAll(async () => {
    for (const host of ["127.0.0.1", "127.0.0.2"]) {
      const server = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => server.listen(port, host, resolve));
      port = (server.address() as AddressInfo).port;
      servers.push(server);
    }
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });
  const onprem = (hosts: string[]) => ({
    kind: "onprem",
    bgp: { routers: ["10.0.0.1"] },
    ssh: { port },
    nodes: [
      { name: "cp", host: hosts[0], address: "10.0.0.10", role: "control-plane" },
      { name: "lb-1", host: hosts[1], address: "10.0.0.11", role: "lb" },
    ],
  });

  it("bootstraps the machines over SSH through OnpremCluster and hands PortableCluster its API server", async () => {
    const outputs = await runProgram({
      environment: onprem(["127.0.0.1", "127.0.0.2"]),
      network,
      loadBalancer: bgpLoadBalancer({ node: "lb-1", address: "10.0.0.11" }, 1),
      sshPrivateKey: "not-a-real-key",
    });
    expect(of("portable-lb:providers:OnpremCluster").map((c) => c.name)).toEqual(["plb"]);
    // Per machine: its script copied, then run; the key reaches every command as a secret.
    const commands = of("command:remote:Command");
    expect(commands.map((c) => c.name).sort()).toEqual([
      "plb-cp-bootstrap",
      "plb-cp-copy",
      "plb-lb-1-bootstrap",
      "plb-lb-1-copy",
    ]);
    for (const c of commands)
      expect(secretValue(c.inputs.connection)).toMatchObject({ privateKey: "not-a-real-key" });
    const [provider] = of("pulumi:providers:kubernetes");
    expect(secretValue(provider!.inputs.kubeconfig)).toContain("server: https://10.0.0.10:6443");
    expect(lbConfig().routingMode).toBe("bgp");
    // onprem's default forwarding reaches the LB pods' config: DSR, with no dataPlane set.
    expect(lbConfig().dataPlane.mode).toBe("dsr");
    expect((outputs.nodes as { name: string }[]).map((n) => n.name)).toEqual(["cp", "lb-1"]);
  });

  it("names at preview a machine SSH cannot reach and the missing key, and registers nothing", async () => {
    await expect(
      runProgram({
        environment: onprem(["127.0.0.1", "127.0.0.3"]),
        network,
        loadBalancer: bgpLoadBalancer({ node: "lb-1", address: "10.0.0.11" }, 1),
      }),
    ).rejects.toThrow(
      [
        SSH_KEY_REQUIRED,
        `environment.nodes[1].host: node lb-1: SSH at 127.0.0.3:${port} did not answer (ECONNREFUSED); check that the machine is up, that sshd listens on environment.ssh.port and that this machine can reach it (got "127.0.0.3")`,
      ].join("\n"),
    );
    await settled();
    expect(recorded).toEqual([]);
  });
});
