// The portability check: one network plan, three environments (an existing on-premises cluster, a
// provisioned AWS one and a GCP one), and PortableCluster on each under Pulumi's mocks. What apps see
// must not differ: the loadBalancerClass, the VIP pools, flannel's network and the LB's own config
// of them. The environments' kubeconfig reaches PortableCluster's Kubernetes provider as a secret.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PortableCluster } from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { secretValue, settled } from "../../../test/unit/pulumiMocks.ts";
import {
  AWS_ACCOUNT,
  AWS_API_IP,
  AWS_ROUTE_TABLE_ID,
  GCP_API_IP,
  GCP_PROJECT,
  installCloudMocks,
} from "./__fixtures__/cloudMocks.ts";
import { AwsCluster } from "./aws/awsCluster.ts";
import { awsEnvironmentSchema } from "./awsEnvironment.ts";
import { resolveEnvironment } from "./environment.ts";
import { GcpCluster } from "./gcp/gcpCluster.ts";
import { gcpEnvironmentSchema } from "./gcpEnvironment.ts";
import type { ProvisionedEnvironment } from "./provider.ts";

const recorded = installCloudMocks();
const dir = mkdtempSync(join(tmpdir(), "plb-portability-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const network = {
  nodeCidr: "10.0.0.0/16",
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [
    { name: "web", cidr: "10.200.0.0/24" },
    { name: "internal", cidr: "10.200.1.0/24" },
  ],
};
const routers = ["10.0.0.1"];
const common = { apiAccessCidrs: ["198.51.100.0/24"], nodes: { lb: 2, workers: 2 } };
const awsCluster = (extra: Record<string, unknown> = {}) =>
  new AwsCluster("plb", {
    environment: awsEnvironmentSchema.parse({
      kind: "aws",
      region: "eu-central-1",
      zones: ["eu-central-1a", "eu-central-1b"],
      ...common,
      ...extra,
    }),
    network,
  });
const gcpCluster = (extra: Record<string, unknown> = {}) =>
  new GcpCluster("plb", {
    environment: gcpEnvironmentSchema.parse({
      kind: "gcp",
      project: GCP_PROJECT,
      region: "europe-west4",
      zones: ["europe-west4-a", "europe-west4-b"],
      ...common,
      ...extra,
    }),
    network,
  });
const configMap = (name: string) =>
  recorded.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && r.inputs.metadata.name === name)!.inputs;
const lbConfig = () =>
  JSON.parse(configMap("portable-lb-controller-config").data["config.json"] as string) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- parsed JSON

function onprem() {
  const file = join(dir, "kubeconfig");
  writeFileSync(
    file,
    "apiVersion: v1\nkind: Config\nclusters: [{ name: c, cluster: { server: 'https://10.0.0.2:6443' } }]\n" +
      "users: [{ name: u, user: {} }]\ncontexts: [{ name: x, context: { cluster: c, user: u } }]\ncurrent-context: x\n",
  );
  return resolveEnvironment({
    kind: "kubeconfig",
    kubeconfig: file,
    platform: "onprem",
    bgp: { routers },
    lbNodeCount: 2,
  });
}

const environments: Record<
  string,
  () => { environment: ProvisionedEnvironment | ReturnType<typeof onprem>; server: string }
> = {
  "onprem (an existing cluster)": () => ({ environment: onprem(), server: "https://10.0.0.2:6443" }),
  aws: () => ({
    environment: awsCluster({ bgp: { routers } }).environment,
    server: `https://${AWS_API_IP}:6443`,
  }),
  gcp: () => ({
    environment: gcpCluster({ bgp: { routers } }).environment,
    server: `https://${GCP_API_IP}:6443`,
  }),
};

/** What apps see of a platform, read from the resources PortableCluster registered. */
async function appFacing(make: (typeof environments)[string]) {
  recorded.length = 0;
  const { environment, server } = make();
  // BGP on all three: the one routing mode every environment offers (the other is below).
  const cluster = new PortableCluster("plb", {
    environment,
    network,
    loadBalancer: {
      replicas: 2,
      image: "registry.example.com/portable-lb/lb:1",
      bgp: { asn: 64512 },
      routeReflectors: [{ node: "rr1", address: "10.0.0.20" }],
    },
  });
  await settled();
  const netConf = JSON.parse(configMap("kube-flannel-cfg").data["net-conf.json"] as string) as {
    Network: string;
  };
  const lb = lbConfig();
  const [k8sProvider] = recorded.filter((r) => r.type === "pulumi:providers:kubernetes");
  const kubeconfig = secretValue(k8sProvider!.inputs.kubeconfig);
  expect(typeof kubeconfig).toBe("string");
  expect(kubeconfig as string).toContain(server);
  expect(await pulumi.isSecret(cluster.kubeconfig)).toBe(true);
  return {
    loadBalancerClass: cluster.loadBalancerClass,
    vipPools: cluster.vipPools,
    routingMode: cluster.routingMode,
    flannelNetwork: netConf.Network,
    lb: { loadBalancerClass: lb.loadBalancerClass, vipPools: lb.vipPools, podCidr: lb.podCidr },
  };
}

describe("the same network plan on onprem, aws and gcp", () => {
  it("gives apps the same loadBalancerClass, VIP pools and flannel network everywhere", async () => {
    const seen: Record<string, unknown> = {};
    for (const [name, make] of Object.entries(environments)) seen[name] = await appFacing(make);
    // The pools as the schema completes them.
    const vipPools = network.vipPools.map((p) => ({ ...p, avoidBuggyIps: false }));
    const expected = {
      loadBalancerClass: "portable-lb.io/ecmp",
      vipPools,
      routingMode: "bgp",
      flannelNetwork: network.podCidr,
      lb: { loadBalancerClass: "portable-lb.io/ecmp", vipPools, podCidr: network.podCidr },
    };
    expect(seen).toEqual({
      "onprem (an existing cluster)": expected,
      aws: expected,
      gcp: expected,
    });
  });
});

// Without BGP peers a cloud cluster routes VIPs through the cloud's routes, which its environment
// made: PortableCluster writes into the LB's config the route table (AWS, its id once created) or the
// network (GCP) the environment hands over, the very ones the LB nodes' permissions name.
describe("cloud-routes with the environment's own route targets", () => {
  const loadBalancer = { replicas: 2, image: "registry.example.com/portable-lb/lb:1" };
  beforeEach(() => (recorded.length = 0));

  it("on aws: the route table the VPC got, once created, the one the LB role may write", async () => {
    const aws = awsCluster();
    const cluster = new PortableCluster("plb", { environment: aws.environment, network, loadBalancer });
    await settled();
    expect(cluster.routingMode).toBe("cloud-routes");
    const config = lbConfig();
    expect(config.routingMode).toBe("cloud-routes");
    expect(config.cloudRoutes).toMatchObject({ cloud: "aws", routeTableIds: [AWS_ROUTE_TABLE_ID] });
    const policy = JSON.parse(
      recorded.find((r) => r.type === "aws:iam/rolePolicy:RolePolicy")!.inputs.policy as string,
    ) as { Statement: { Resource: string | string[] }[] };
    expect(policy.Statement[0]!.Resource).toEqual([
      `arn:aws:ec2:eu-central-1:${AWS_ACCOUNT}:route-table/${AWS_ROUTE_TABLE_ID}`,
    ]);
    // The pods restart when the config does: the hash annotation covers the route tables too.
    const deployment = recorded.find((r) => r.type === "kubernetes:apps/v1:Deployment")!;
    expect(deployment.inputs.spec.template.metadata.annotations["portable-lb.io/config-hash"]).toMatch(
      /^[0-9a-f]+$/,
    );
  });

  it("on aws: route tables the user names win, and the environment's are not added", async () => {
    const aws = awsCluster();
    new PortableCluster("plb", {
      environment: aws.environment,
      network,
      loadBalancer: { ...loadBalancer, cloudRoutes: { routeTableIds: ["rtb-0abc"] } },
    });
    await settled();
    expect(lbConfig().cloudRoutes.routeTableIds).toEqual(["rtb-0abc"]);
  });

  it("on gcp: the project and the network the environment made, which the LB nodes' role covers", async () => {
    const gcp = gcpCluster();
    const cluster = new PortableCluster("plb", { environment: gcp.environment, network, loadBalancer });
    await settled();
    expect(cluster.routingMode).toBe("cloud-routes");
    expect(lbConfig().cloudRoutes).toMatchObject({
      cloud: "gcp",
      project: GCP_PROJECT,
      network: "plb-network",
    });
    expect(recorded.find((r) => r.type === "gcp:compute/network:Network")!.inputs.name).toBe("plb-network");
    expect(recorded.filter((r) => r.type === "gcp:projects/iAMMember:IAMMember")).toHaveLength(1);
  });
});
