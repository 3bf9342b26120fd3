// The portability check: one network plan, three environments (an existing on-premises cluster, a
// provisioned AWS one and a GCP one), and PortableCluster on each under Pulumi's mocks. What apps see
// must not differ: the loadBalancerClass, the VIP pools, flannel's network and the LB's own config
// of them. The environments' kubeconfig reaches PortableCluster's Kubernetes provider as a secret.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PortableCluster } from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { installMocks, secretValue, settled } from "../../../test/unit/pulumiMocks.ts";
import { AWS_API_IP, GCP_API_IP, GCP_PROJECT, cloudCall, cloudOutputs } from "./__fixtures__/cloudMocks.ts";
import { AwsCluster } from "./aws/awsCluster.ts";
import { awsEnvironmentSchema } from "./awsEnvironment.ts";
import { resolveEnvironment } from "./environment.ts";
import { GcpCluster } from "./gcp/gcpCluster.ts";
import { gcpEnvironmentSchema } from "./gcpEnvironment.ts";
import type { ProvisionedEnvironment } from "./provider.ts";

const recorded = installMocks({
  outputs: (type, _name, inputs) => cloudOutputs(type, inputs),
  call: (token) => cloudCall(token),
});
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
const cloudCommon = { apiAccessCidrs: ["198.51.100.0/24"], nodes: { lb: 2, workers: 2 }, bgp: { routers } };

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
    environment: new AwsCluster("plb", {
      environment: awsEnvironmentSchema.parse({
        kind: "aws",
        region: "eu-central-1",
        zones: ["eu-central-1a", "eu-central-1b"],
        ...cloudCommon,
      }),
      network,
    }).environment,
    server: `https://${AWS_API_IP}:6443`,
  }),
  gcp: () => ({
    environment: new GcpCluster("plb", {
      environment: gcpEnvironmentSchema.parse({
        kind: "gcp",
        project: GCP_PROJECT,
        region: "europe-west4",
        zones: ["europe-west4-a", "europe-west4-b"],
        ...cloudCommon,
      }),
      network,
    }).environment,
    server: `https://${GCP_API_IP}:6443`,
  }),
};

/** What apps see of a platform, read from the resources PortableCluster registered. */
async function appFacing(make: (typeof environments)[string]) {
  recorded.length = 0;
  const { environment, server } = make();
  // BGP on all three (the clouds' cloud-routes targets are not yet taken by PortableCluster).
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
  const configMap = (name: string) =>
    recorded.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && r.inputs.metadata.name === name)!
      .inputs;
  const netConf = JSON.parse(configMap("kube-flannel-cfg").data["net-conf.json"] as string) as {
    Network: string;
  };
  const lbConfig = JSON.parse(
    configMap("portable-lb-controller-config").data["config.json"] as string,
  ) as Record<string, unknown>;
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
    lb: {
      loadBalancerClass: lbConfig.loadBalancerClass,
      vipPools: lbConfig.vipPools,
      podCidr: lbConfig.podCidr,
    },
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
