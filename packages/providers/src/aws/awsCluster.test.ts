// The aws environment's resource graph under Pulumi's mocks: what is created per role, and the
// inputs that matter for the data path and for security: the IAM policy documents parsed and held to
// least privilege, sourceDestCheck, security group rules (only the VIP ports open to the world),
// the user data each machine boots, and what the environment hands PortableCluster.
import * as pulumi from "@pulumi/pulumi";
import { load } from "js-yaml";
import { secretValue, settled, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import { awsEnvironmentSchema } from "../awsEnvironment.ts";
import { testCredentialsScript } from "../bootstrap/__fixtures__/testCredentials.ts";
import { expectMachinesBootOnce } from "../__fixtures__/machinesBootOnce.ts";
import {
  AWS_ACCOUNT,
  AWS_API_IP,
  DEBIAN_AMI,
  AWS_ROUTE_TABLE_ID,
  installCloudMocks,
} from "../__fixtures__/cloudMocks.ts";
import { renderCloudInit } from "../bootstrap/cloudInit.ts";
import { clusterPorts } from "../clusterPorts.ts";
import { expectApiServerWait } from "../__fixtures__/apiServerWait.ts";
import { ApiServerReady } from "../apiServer/apiServerReady.ts";
import { AwsCluster, DEBIAN_AMI_OWNER } from "./awsCluster.ts";

const ACCOUNT = AWS_ACCOUNT;
const API_IP = AWS_API_IP;

const calls: { token: string; inputs: Record<string, unknown> }[] = [];
const recorded = installCloudMocks((token, inputs) => calls.push({ token, inputs }));

const network = { nodeCidr: "10.0.0.0/16", podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
const environment = (extra: Record<string, unknown> = {}) =>
  awsEnvironmentSchema.parse({
    kind: "aws",
    region: "eu-central-1",
    zones: ["eu-central-1a", "eu-central-1b"],
    apiAccessCidrs: ["198.51.100.0/24"],
    nodes: { lb: 3, workers: 2 },
    vipPorts: [80, 443],
    ...extra,
  });

type Inputs = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
const of = (type: string) => recorded.filter((r) => r.type === type);
const instances = () => of("aws:ec2/instance:Instance");
const roleOf = (i: { inputs: Inputs }) => i.inputs.tags["portable-lb.io/role"] as string;

async function build(extra: Record<string, unknown> = {}, networkExtra: Record<string, unknown> = {}) {
  recorded.length = 0;
  const cluster = new AwsCluster("plb", {
    environment: environment(extra),
    network: { ...network, ...networkExtra },
  });
  await settled();
  return cluster;
}

/** The bootstrap script a machine boots, from its (secret) user data. */
function scriptOf(instance: { inputs: Inputs }): string {
  const userData = secretValue(instance.inputs.userData) as string;
  expect(typeof userData).toBe("string");
  return (load(userData) as { write_files: { content: string }[] }).write_files[0]!.content;
}

describe("AwsCluster (cloud-routes: no BGP peers)", () => {
  let cluster: AwsCluster;
  beforeAll(async () => {
    cluster = await build();
  });

  it("makes a VPC on the node network with a subnet in each zone, all routed by one route table", () => {
    expect(of("aws:ec2/vpc:Vpc").map((v) => v.inputs.cidrBlock)).toEqual(["10.0.0.0/16"]);
    expect(of("aws:ec2/subnet:Subnet").map((s) => [s.inputs.availabilityZone, s.inputs.cidrBlock])).toEqual([
      ["eu-central-1a", "10.0.0.0/17"],
      ["eu-central-1b", "10.0.128.0/17"],
    ]);
    const [table] = of("aws:ec2/routeTable:RouteTable");
    expect(table!.inputs.routes).toEqual([{ cidrBlock: "0.0.0.0/0", gatewayId: "plb-network-igw-id" }]);
    expect(of("aws:ec2/routeTableAssociation:RouteTableAssociation").map((a) => a.inputs)).toEqual([
      { subnetId: "plb-network-eu-central-1a-id", routeTableId: AWS_ROUTE_TABLE_ID },
      { subnetId: "plb-network-eu-central-1b-id", routeTableId: AWS_ROUTE_TABLE_ID },
    ]);
    expect(of("aws:ec2/internetGateway:InternetGateway")).toHaveLength(1);
  });

  it("makes one control plane, the LB nodes and the workers, spread over the zones at their planned addresses", () => {
    const byRole = (role: string) => instances().filter((i) => roleOf(i) === role);
    expect(byRole("control-plane")).toHaveLength(1);
    expect(byRole("lb")).toHaveLength(3);
    expect(byRole("worker")).toHaveLength(2);
    for (const node of cluster.environment.nodes.filter((n) => n.role !== "control-plane")) {
      const instance = instances().find((i) => i.inputs.tags.Name === node.name)!;
      expect(instance.inputs).toMatchObject({
        privateIp: node.address,
        subnetId: `plb-network-${node.zone}-id`,
        ami: DEBIAN_AMI,
        instanceType: "t3.medium",
        metadataOptions: { httpTokens: "required" },
        rootBlockDevice: { encrypted: true },
      });
    }
    // The control plane sits on its interface, whose Elastic IP is there from first boot.
    const [eni] = of("aws:ec2/networkInterface:NetworkInterface");
    expect(eni!.inputs.privateIps).toEqual(["10.0.0.10"]);
    expect(byRole("control-plane")[0]!.inputs.primaryNetworkInterface).toEqual({
      networkInterfaceId: "plb-plb-cp-id",
    });
    expect(of("aws:ec2/eip:Eip")[0]!.inputs).toMatchObject({
      networkInterface: "plb-plb-cp-id",
      associateWithPrivateIp: "10.0.0.10",
    });
  });

  it("turns the source/destination check off on the LB nodes only, and gives only them the role", () => {
    for (const i of instances()) {
      const lb = roleOf(i) === "lb";
      if (roleOf(i) !== "control-plane") expect(i.inputs.sourceDestCheck).toBe(!lb);
      expect(i.inputs.iamInstanceProfile).toBe(lb ? "plb-lb-profile" : undefined);
      expect(i.inputs.metadataOptions.httpPutResponseHopLimit).toBe(lb ? 2 : 1);
    }
  });

  it("lets only EC2 assume the LB role, and lets it write routes in this cluster's route table only", () => {
    const [role] = of("aws:iam/role:Role");
    expect(JSON.parse(role!.inputs.assumeRolePolicy as string)).toEqual({
      Version: "2012-10-17",
      Statement: [{ Effect: "Allow", Principal: { Service: "ec2.amazonaws.com" }, Action: "sts:AssumeRole" }],
    });
    const policies = of("aws:iam/rolePolicy:RolePolicy");
    expect(policies).toHaveLength(1);
    const policy = JSON.parse(policies[0]!.inputs.policy as string) as {
      Statement: { Effect: string; Action: string[]; Resource: string | string[] }[];
    };
    const actions = policy.Statement.flatMap((s) => s.Action).sort();
    expect(actions).toEqual([
      "ec2:CreateRoute",
      "ec2:DeleteRoute",
      "ec2:DescribeInstances",
      "ec2:DescribeRouteTables",
      "ec2:ReplaceRoute",
    ]);
    for (const s of policy.Statement) {
      expect(s.Effect).toBe("Allow");
      expect(s.Action.every((a) => !a.includes("*"))).toBe(true);
      // "*" only for the Describe calls, which IAM cannot scope.
      if (s.Resource === "*") expect(s.Action.every((a) => a.startsWith("ec2:Describe"))).toBe(true);
      else
        expect(s.Resource).toEqual([`arn:aws:ec2:eu-central-1:${ACCOUNT}:route-table/${AWS_ROUTE_TABLE_ID}`]);
    }
    expect(of("aws:iam/instanceProfile:InstanceProfile")[0]!.inputs.role).toBe("plb-lb-role");
  });

  it("opens to the world only the VIP ports, on the LB nodes; the cluster's ports only among its machines", () => {
    const rules = of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule").map((r) => r.inputs);
    const open = rules.filter((r) => r.cidrIpv4 === "0.0.0.0/0");
    expect(open.map((r) => [r.securityGroupId, r.ipProtocol, r.fromPort, r.toPort])).toEqual([
      ["plb-firewall-lb-nodes-id", "tcp", 80, 80],
      ["plb-firewall-lb-nodes-id", "tcp", 443, 443],
    ]);
    const internal = rules.filter((r) => r.referencedSecurityGroupId !== undefined);
    expect(internal.map((r) => [r.ipProtocol, r.fromPort, r.toPort])).toEqual(
      clusterPorts().map((p) => [p.protocol, p.from, p.to]),
    );
    expect(internal.every((r) => r.securityGroupId === "plb-firewall-nodes-id")).toBe(true);
    expect(internal.every((r) => r.referencedSecurityGroupId === "plb-firewall-nodes-id")).toBe(true);
    expect(clusterPorts().map((p) => `${p.protocol}/${p.from}-${p.to}`)).toEqual([
      "tcp/6443-6443",
      "tcp/10250-10250",
      "udp/8472-8472",
      "tcp/179-179",
      "udp/3784-3785",
    ]);
    const api = rules.filter((r) => r.securityGroupId === "plb-firewall-control-plane-id");
    expect(api.map((r) => [r.cidrIpv4, r.fromPort])).toEqual([["198.51.100.0/24", 6443]]);
    expect(rules).toHaveLength(open.length + internal.length + api.length);
    expect(rules.every((r) => r.ipProtocol !== "-1")).toBe(true);
    // Security groups on each machine: every one in `nodes`, the LB nodes also in `lb-nodes`.
    for (const i of instances().filter((x) => roleOf(x) !== "control-plane"))
      expect(i.inputs.vpcSecurityGroupIds).toEqual([
        "plb-firewall-nodes-id",
        ...(roleOf(i) === "lb" ? ["plb-firewall-lb-nodes-id"] : []),
      ]);
    expect(of("aws:ec2/networkInterface:NetworkInterface")[0]!.inputs.securityGroups).toEqual([
      "plb-firewall-nodes-id",
      "plb-firewall-control-plane-id",
    ]);
  });

  it("boots each machine with the shared bootstrap script for its node, from cloud-init", () => {
    for (const node of cluster.environment.nodes) {
      const instance = instances().find((i) => i.inputs.tags.Name === node.name)!;
      const expected = testCredentialsScript(node, {
        providerId: { from: "aws-metadata" },
        controlPlaneAddress: "10.0.0.10",
        apiServerCertSans: [API_IP],
        network,
      });
      expect(secretValue(instance.inputs.userData)).toBe(renderCloudInit(expected));
      expect(scriptOf(instance).includes("node-labels")).toBe(node.role === "lb");
    }
  });

  it("hands PortableCluster the kubeconfig (a secret), the nodes, and the route table for cloud routes", async () => {
    const env = cluster.environment;
    expect(env).toMatchObject({ kind: "aws", platform: "aws", lbNodeCount: 3 });
    expect(env.bgp).toBeUndefined();
    expect(await pulumi.isSecret(env.kubeconfig)).toBe(true);
    expect(await valueOf(env.kubeconfig)).toContain(`server: https://${API_IP}:6443`);
    const targets = env.cloudRoutes;
    expect(targets?.cloud).toBe("aws");
    if (targets?.cloud === "aws")
      expect(await valueOf(pulumi.output(targets.routeTableIds))).toEqual([AWS_ROUTE_TABLE_ID]);
    // Its objects wait for the API server, which waits for every machine.
    expect(env.dependsOn).toEqual([expect.any(ApiServerReady)]);
    expectApiServerWait(
      recorded,
      instances().map((i) => `plb-${i.inputs.tags.Name}-id`),
      await valueOf(env.kubeconfig),
    );
    expect(await typeChain(cluster.network)).toBe(
      "portable-lb:providers:AwsCluster$portable-lb:providers:AwsNetwork",
    );
    expect(await typeChain(cluster.securityGroups)).toBe(
      "portable-lb:providers:AwsCluster$portable-lb:providers:AwsSecurityGroups",
    );
    expect(await typeChain(cluster.lbNodeRole!)).toBe(
      "portable-lb:providers:AwsCluster$portable-lb:providers:LbNodeRole",
    );
    // Every AWS resource goes through the cluster's own provider, in the environment's region.
    const [provider] = of("pulumi:providers:aws");
    expect(provider!.inputs.region).toBe("eu-central-1");
    const awsResources = recorded.filter((r) => r.type.startsWith("aws:"));
    expect(awsResources.length).toBeGreaterThan(20);
    for (const r of awsResources) expect(r.provider).toMatch(/\$pulumi:providers:aws::plb-aws::plb-aws-id$/);
  });

  it("opens flannel's VXLAN among the machines on the port the cluster's flannel uses", async () => {
    await build({}, { flannelVxlanPort: 4790 });
    const udp = of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
      .map((r) => r.inputs)
      .filter((r) => r.referencedSecurityGroupId !== undefined && r.ipProtocol === "udp");
    expect(udp.map((r) => [r.fromPort, r.toPort, r.description])).toEqual([
      [4790, 4790, "flannel's VXLAN"],
      [3784, 3785, "BFD (single hop and multihop)"],
    ]);
  });

  it("looks up Debian's own image when no AMI is given", async () => {
    expect(instances().every((i) => i.inputs.ami === DEBIAN_AMI)).toBe(true);
    expect(calls.find((c) => c.token === "aws:ec2/getAmi:getAmi")?.inputs).toEqual({
      mostRecent: true,
      owners: [DEBIAN_AMI_OWNER],
      filters: [
        { name: "name", values: ["debian-12-amd64-*"] },
        { name: "architecture", values: ["x86_64"] },
      ],
    });
    calls.length = 0;
    await build({ ami: "ami-0123456789abcdef0" });
    expect(calls.map((c) => c.token)).not.toContain("aws:ec2/getAmi:getAmi");
    expect(instances().every((i) => i.inputs.ami === "ami-0123456789abcdef0")).toBe(true);
  });
});

describe("AwsCluster (BGP: peers given)", () => {
  it("makes no cloud-routes role, opens BGP and BFD to the routers only, and hands over the peers", async () => {
    const cluster = await build({ bgp: { routers: ["10.0.0.1", "10.0.0.2"] }, lbTaint: true });
    expect(of("aws:iam/role:Role")).toEqual([]);
    expect(of("aws:iam/rolePolicy:RolePolicy")).toEqual([]);
    expect(instances().every((i) => i.inputs.iamInstanceProfile === undefined)).toBe(true);
    const fromRouters = of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
      .map((r) => r.inputs)
      .filter((r) => r.cidrIpv4?.endsWith("/32"));
    expect(fromRouters.map((r) => [r.cidrIpv4, r.ipProtocol, r.fromPort, r.toPort])).toEqual([
      ["10.0.0.1/32", "tcp", 179, 179],
      ["10.0.0.1/32", "udp", 3784, 3785],
      ["10.0.0.2/32", "tcp", 179, 179],
      ["10.0.0.2/32", "udp", 3784, 3785],
    ]);
    expect(cluster.environment.bgp).toEqual({ routers: ["10.0.0.1", "10.0.0.2"] });
    expect(cluster.environment.cloudRoutes).toBeUndefined();
    // The LB nodes are tainted as asked; the others are not.
    for (const i of instances()) expect(scriptOf(i).includes("taints:")).toBe(roleOf(i) === "lb");
  });

  it("refuses a node network the plan cannot hold before registering anything", async () => {
    recorded.length = 0;
    expect(
      () =>
        new AwsCluster("plb", {
          environment: environment(),
          network: { ...network, nodeCidr: "10.0.0.0/8" },
        }),
    ).toThrow("network.nodeCidr: is the VPC's range, and the cloud allows at most a /16");
    await settled();
    expect(recorded).toEqual([]);
  });
});

describe("AwsCluster's machines over time", () => {
  // The control plane too: replacing it for a new script would start an empty cluster.
  it("runs each machine's script once: a new script leaves running machines be, a replacement deletes first", () =>
    expectMachinesBootOnce(
      "aws:ec2/instance:Instance",
      "userData",
      (opts) =>
        new AwsCluster("plb-once", { environment: environment(), network }, opts).environment.nodes.length,
    ));
});
