// The portability proof: the one app stack rendered against the platform stack of every environment
// (onprem, aws, gcp, an existing cluster and the lab). Each platform's outputs are the root program's
// own, run under Pulumi's mocks with that environment's stack settings; the app reads them through its
// StackReference. Its objects must be the same everywhere but for what the platform hands in.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { load } from "js-yaml";
import * as pulumi from "@pulumi/pulumi";
import type { OutputMap } from "@pulumi/pulumi/automation/index.js";
import { VIP_POOL_ANNOTATION } from "@portable-lb/core/config";
import { labDir, type LabPlan } from "@portable-lb/lab";
import {
  cloudCall,
  cloudId,
  cloudOutputs,
  GCP_PROJECT,
} from "../../packages/providers/src/__fixtures__/cloudMocks.ts";
import { installMocks, settled, valueOf } from "../../test/unit/pulumiMocks.ts";
import { renderAppStack, type RenderedObject } from "./renderAppStack.ts";

// The lab runs the LB image this checkout built (lb-image/.image.json); a unit test needs none built.
jest.mock("../../packages/lab/src/builtLbImage.ts", () => ({
  builtLbImage: () => ({ ref: "localhost/portable-lb/lb:unit", archive: "/nonexistent/lb.tar" }),
}));

const repoRoot = join(__dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "plb-app-portability-"));
const image = "registry.example.com/portable-lb/lb:1";
const cloud = { apiAccessCidrs: ["198.51.100.0/24"], nodes: { lb: 3, workers: 2 } };

/** Each environment's root-program settings (`portable-lb:` config), with the stand-ins' ports. */
function platformSettings(sshPort: number, apiPort: number): Record<string, Record<string, unknown>> {
  const kubeconfig = join(dir, "kubeconfig");
  // Plain HTTP, so a bare listener can answer as its API server (JSON is YAML too).
  const cluster = { server: `http://127.0.0.1:${apiPort}`, "insecure-skip-tls-verify": true };
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster }],
      users: [{ name: "u", user: {} }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  const bgp = (node: string, address: string, replicas: number) => ({
    replicas,
    image,
    bgp: { asn: 64512 },
    routeReflectors: [{ node, address }],
  });
  const lab = (
    load(readFileSync(join(repoRoot, "Pulumi.lab.yaml"), "utf8")) as { config: Record<string, unknown> }
  ).config;
  return {
    onprem: {
      environment: {
        kind: "onprem",
        bgp: { routers: ["10.0.0.1"] },
        ssh: { port: sshPort },
        nodes: [
          { name: "cp", host: "127.0.0.1", address: "10.0.0.10", role: "control-plane" },
          { name: "lb-1", host: "127.0.0.2", address: "10.0.0.11", role: "lb" },
        ],
      },
      network: network("10.0.0.0/24", [{ name: "web", cidr: "10.2.1.0/24" }]),
      loadBalancer: bgp("lb-1", "10.0.0.11", 1),
      sshPrivateKey: "not-a-real-key",
    },
    aws: {
      environment: {
        kind: "aws",
        region: "eu-central-1",
        zones: ["eu-central-1a", "eu-central-1b"],
        ...cloud,
      },
      network: network("10.0.0.0/16", [
        { name: "internal", cidr: "10.200.1.0/24" },
        { name: "web", cidr: "10.200.0.0/24" },
      ]),
      loadBalancer: { replicas: 3, image },
    },
    gcp: {
      environment: {
        kind: "gcp",
        project: GCP_PROJECT,
        region: "europe-west4",
        zones: ["europe-west4-a", "europe-west4-b"],
        ...cloud,
      },
      network: network("10.0.0.0/20", [{ name: "web", cidr: "10.210.0.0/24" }]),
      loadBalancer: { replicas: 3, image },
    },
    // A cluster that had a load balancer before: its platform team named portable-lb's class its own.
    existing: {
      environment: { kind: "kubeconfig", kubeconfig, bgp: { routers: ["192.168.1.1"] }, lbNodeCount: 2 },
      network: network("192.168.1.0/24", [{ name: "web", cidr: "172.16.5.0/24" }]),
      loadBalancer: { ...bgp("node-2", "192.168.1.12", 2), loadBalancerClass: "example.com/shared-lb" },
    },
    // The stack `npm run lab` brings up, as its Pulumi.lab.yaml says.
    lab: Object.fromEntries(Object.entries(lab).map(([k, v]) => [k.replace(/^portable-lb:/, ""), v])),
  };
}

function network(nodeCidr: string, vipPools: { name: string; cidr: string }[]) {
  return { nodeCidr, podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16", vipPools };
}

/**
 * The root program's stack outputs with these settings, as the engine stores them and the
 * Automation API's `stack.outputs()` gives them: plain JSON values, each marked secret or not.
 */
async function platformStack(settings: Record<string, unknown>): Promise<OutputMap> {
  installMocks({
    outputs: (type, _name, inputs) => cloudOutputs(type, inputs) ?? labOutputs(type, inputs),
    call: (token) => cloudCall(token),
    id: cloudId,
  });
  pulumi.runtime.setAllConfig(
    Object.fromEntries(
      Object.entries(settings).map(([k, v]) => [
        `portable-lb:${k}`,
        typeof v === "string" ? v : JSON.stringify(v),
      ]),
    ),
    ["portable-lb:sshPrivateKey"],
  );
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the program's own export form
  const main = require("../../index.ts") as () => Promise<Record<string, unknown>>;
  const outputs = await main();
  await settled();
  const entries = Object.entries(outputs).map(async ([name, value]) => {
    const output = pulumi.output(value) as pulumi.Output<unknown>;
    const plain = JSON.parse(JSON.stringify(await valueOf(output))) as unknown;
    return [name, { value: plain, secret: await pulumi.isSecret(output) }] as const;
  });
  return Object.fromEntries(await Promise.all(entries));
}

/** What the lab's control-plane ops report: the admin kubeconfig's file, which the lab hands on. */
function labOutputs(type: string, inputs: Record<string, unknown>): Record<string, unknown> | undefined {
  if (type !== "pulumi-nodejs:dynamic/lab:ControlPlane") return undefined;
  const { plan } = inputs.spec as { plan: LabPlan };
  return { state: { kubeconfigFile: join(labDir(plan), "admin.kubeconfig") } };
}

/** The lab's own images, which its nodes import; names and empty files are enough under mocks. */
const LAB_IMAGES = ["PAUSE", "FLANNEL", "BUSYBOX", "DEMO_WEB", "COREDNS"];

const platforms: Record<string, OutputMap> = {};
const renders: Record<string, RenderedObject[]> = {};
const stopped: (() => Promise<void>)[] = [];
const savedEnv = { ...process.env };

beforeAll(async () => {
  // onprem's machines: loopback listeners answer for their sshd (the preview only connects).
  let sshPort = 0;
  for (const host of ["127.0.0.1", "127.0.0.2"]) {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(sshPort, host, resolve));
    sshPort = (server.address() as AddressInfo).port;
    stopped.push(() => close(server));
  }
  // The existing cluster's API server answers the program's probe of it.
  const api = createHttpServer((_req, res) =>
    res.writeHead(200, { "content-type": "application/json" }).end('{"major":"1","minor":"35"}'),
  );
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  stopped.push(() => close(api));
  for (const name of LAB_IMAGES) {
    writeFileSync(join(dir, name), "");
    process.env[`PORTABLE_LB_${name}_IMAGE_ARCHIVE`] = join(dir, name);
    process.env[`PORTABLE_LB_${name}_IMAGE_REF`] = `localhost/portable-lb/${name.toLowerCase()}:unit`;
  }

  const settings = platformSettings(sshPort, (api.address() as AddressInfo).port);
  for (const [name, s] of Object.entries(settings)) platforms[name] = await platformStack(s);
  for (const [name, outputs] of Object.entries(platforms)) renders[name] = await renderAppStack(outputs);
}, 120_000);

afterAll(async () => {
  for (const stop of stopped) await stop();
  process.env = savedEnv;
  rmSync(dir, { recursive: true, force: true });
});

function close(server: Server | ReturnType<typeof createHttpServer>): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

const outputOf = (name: string, key: string) => platforms[name]![key]!;

describe("the app stack on every platform", () => {
  it("gets a different cluster, class, routing and pool ranges from each platform", () => {
    const names = Object.keys(platforms);
    expect(names).toEqual(["onprem", "aws", "gcp", "existing", "lab"]);
    const kubeconfigs = names.map((n) => outputOf(n, "kubeconfig"));
    expect(kubeconfigs.every((k) => k.secret && typeof k.value === "string")).toBe(true);
    expect(new Set(kubeconfigs.map((k) => k.value)).size).toBe(names.length);
    expect(names.map((n) => outputOf(n, "loadBalancerClass").value)).toEqual([
      "portable-lb.io/ecmp",
      "portable-lb.io/ecmp",
      "portable-lb.io/ecmp",
      "example.com/shared-lb",
      "portable-lb.io/ecmp",
    ]);
    expect(names.map((n) => outputOf(n, "routingMode").value)).toEqual([
      "bgp",
      "cloud-routes",
      "cloud-routes",
      "bgp",
      "bgp",
    ]);
    const webCidr = (n: string) =>
      (outputOf(n, "vipPools").value as { name: string; cidr: string }[]).find((p) => p.name === "web")!.cidr;
    expect(new Set(names.map(webCidr)).size).toBe(names.length);
  });

  it("renders the same objects everywhere but for what the platform hands in", () => {
    for (const name of Object.keys(renders))
      expect({ [name]: renders[name] }).toEqual({ [name]: renders.onprem });
  });

  it("renders the app's own objects: a LoadBalancer Service of the platform's class from the web pool", () => {
    // The platform with a class of its own: had the app taken the default, this would show it.
    const objects = renders.existing!;
    expect(objects.map((o) => `${o.type} ${o.name}`)).toEqual([
      "kubernetes:apps/v1:Deployment web",
      "kubernetes:core/v1:Namespace shop",
      "kubernetes:core/v1:Service web",
      "portable-lb:core:LoadBalancerService web",
      "pulumi:providers:kubernetes platform",
      "pulumi:pulumi:StackReference platform",
    ]);
    const of = (type: string) => objects.find((o) => o.type === type)! as RenderedObject & { inputs: any }; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
    const service = of("kubernetes:core/v1:Service").inputs;
    expect(service.spec).toMatchObject({
      type: "LoadBalancer",
      loadBalancerClass: "<platform loadBalancerClass>",
    });
    expect(service.metadata.annotations).toEqual({ [VIP_POOL_ANNOTATION]: "web" });
    // Everything goes to the platform's cluster, with its kubeconfig kept secret.
    const provider = of("pulumi:providers:kubernetes");
    expect(provider.inputs.kubeconfig).toEqual({ secret: "<platform kubeconfig>" });
    const ref = `urn:pulumi:unit::shop::pulumi:providers:kubernetes::platform::platform-id`;
    for (const type of [
      "kubernetes:apps/v1:Deployment",
      "kubernetes:core/v1:Namespace",
      "kubernetes:core/v1:Service",
    ])
      expect([type, of(type).provider]).toEqual([type, ref]);
  });

  it("shows a platform handing over its kubeconfig in plaintext: the comparison is not vacuous", async () => {
    const plaintext = await renderAppStack({
      ...platforms.aws!,
      kubeconfig: { ...outputOf("aws", "kubeconfig"), secret: false },
    });
    expect(plaintext).not.toEqual(renders.aws);
    // And only there: the provider's kubeconfig, the one input that came in secret.
    const expected = renders.aws!.map((o) =>
      o.type === "pulumi:providers:kubernetes"
        ? { ...o, inputs: { ...o.inputs, kubeconfig: "<platform kubeconfig>" } }
        : o,
    );
    expect(plaintext).toEqual(expected);
  });

  it("fails on a platform without the app's pool, naming the pools it has", async () => {
    await expect(
      renderAppStack({
        ...platforms.lab!,
        vipPools: { value: [{ name: "public", cidr: "10.9.0.0/24" }], secret: false },
      }),
    ).rejects.toThrow('service.pool: no such VIP pool (got "web"); use one of: public');
  });
});
