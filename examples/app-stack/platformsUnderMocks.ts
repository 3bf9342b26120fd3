// The platform stacks of every environment, as the root program (index.ts at the repo's root) makes
// them under Pulumi's mocks with each environment's stack settings: its outputs as the engine stores
// them. Loopback listeners stand in for what a preview reaches (onprem's sshd, an existing cluster's
// API server). The portability proof renders the app stack against these (portability.test.ts, and
// the lab's e2e test beside the real lab's outputs).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { load } from "js-yaml";
import * as pulumi from "@pulumi/pulumi";
import type { OutputMap } from "@pulumi/pulumi/automation/index.js";
import { labDir, type LabPlan } from "@portable-lb/lab";
import {
  cloudCall,
  cloudId,
  cloudOutputs,
  GCP_PROJECT,
} from "../../packages/providers/src/__fixtures__/cloudMocks.ts";
import { installMocks, settled, valueOf } from "../../test/unit/pulumiMocks.ts";

const repoRoot = join(__dirname, "..", "..");
const image = "registry.example.com/portable-lb/lb:1";
const cloud = { apiAccessCidrs: ["198.51.100.0/24"], nodes: { lb: 3, workers: 2 } };

/** Each environment's root-program settings (`portable-lb:` config), with the stand-ins' ports. */
function platformSettings(
  dir: string,
  sshPort: number,
  apiPort: number,
): Record<string, Record<string, unknown>> {
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

/**
 * Every environment's platform outputs, by environment (onprem, aws, gcp, existing, and lab unless
 * `lab` is false: where the real lab's are at hand).
 */
export async function platformsUnderMocks(opts: { lab: boolean }): Promise<Record<string, OutputMap>> {
  const dir = mkdtempSync(join(tmpdir(), "plb-app-platforms-"));
  const servers: (Server | ReturnType<typeof createHttpServer>)[] = [];
  const savedEnv = { ...process.env };
  try {
    // onprem's machines: loopback listeners answer for their sshd (the preview only connects).
    let sshPort = 0;
    for (const host of ["127.0.0.1", "127.0.0.2"]) {
      const server = createServer((socket) => socket.destroy());
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(sshPort, host, resolve));
      sshPort = (server.address() as AddressInfo).port;
    }
    // The existing cluster's API server answers the program's probe of it.
    const api = createHttpServer((_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end('{"major":"1","minor":"35"}'),
    );
    servers.push(api);
    await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
    if (opts.lab)
      for (const name of LAB_IMAGES) {
        writeFileSync(join(dir, name), "");
        process.env[`PORTABLE_LB_${name}_IMAGE_ARCHIVE`] = join(dir, name);
        process.env[`PORTABLE_LB_${name}_IMAGE_REF`] = `localhost/portable-lb/${name.toLowerCase()}:unit`;
      }
    const settings = platformSettings(dir, sshPort, (api.address() as AddressInfo).port);
    if (!opts.lab) delete settings.lab;
    const platforms: Record<string, OutputMap> = {};
    for (const [name, s] of Object.entries(settings)) platforms[name] = await platformStack(s);
    return platforms;
  } finally {
    process.env = savedEnv;
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
}
