// The wait before a provisioned cluster's Kubernetes objects, against the run's real kube-apiserver:
// it returns once /readyz answers over TLS pinned to the cluster's CA with the admin certificate,
// waits through an API server that is not there yet, refuses a server another CA vouches for, and
// gives up in its bound with an error naming the endpoint. The dynamic provider runs it by path.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { TEST_CA_CERT } from "../../packages/providers/src/bootstrap/__fixtures__/testCredentials.ts";
import {
  apiServerReadyProvider,
  WAIT_MODULE,
} from "../../packages/providers/src/apiServer/apiServerReady.ts";
import { waitForApiServer } from "../../packages/providers/src/apiServer/waitForApiServer.ts";
import { TcpProxy } from "../harness/tcpProxy.ts";
import { TestStack } from "../harness/testStack.ts";
import { testKubeconfig, testKubeConfig } from "../harness/testEnv.ts";

interface KubeconfigJson {
  clusters: { cluster: { server: string; "certificate-authority-data"?: string } }[];
}

/** The run's admin kubeconfig (JSON), its server and CA changed as asked. */
function kubeconfigWith(o: { server?: string; caPem?: string } = {}): string {
  const kc = JSON.parse(readFileSync(testKubeconfig(), "utf8")) as KubeconfigJson;
  const cluster = kc.clusters[0]!.cluster;
  if (o.server) cluster.server = o.server;
  if (o.caPem) cluster["certificate-authority-data"] = Buffer.from(o.caPem).toString("base64");
  return JSON.stringify(kc);
}

describe("waiting for a provisioned cluster's API server", () => {
  const apiServer = new URL(testKubeConfig().getCurrentCluster()!.server);
  let proxy: TcpProxy;
  let proxied: string;

  beforeEach(async () => {
    proxy = new TcpProxy({ host: apiServer.hostname, port: Number(apiServer.port) });
    proxied = `https://127.0.0.1:${await proxy.up()}`;
  });
  afterEach(async () => {
    await proxy.cut();
  });

  it("returns at once when /readyz answers through the CA-pinned admin credentials", async () => {
    const ready = await waitForApiServer(kubeconfigWith({ server: proxied }), { timeoutS: 10 });
    expect(ready.server).toBe(proxied);
    expect(ready.waitedS).toBeLessThan(5);
    expect(proxy.accepted).toBeGreaterThan(0);
  });

  it("waits while nothing answers, and returns once the API server is there", async () => {
    await proxy.cut();
    const started = Date.now();
    const waiting = waitForApiServer(kubeconfigWith({ server: proxied }), { timeoutS: 30, retryMs: 200 });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(proxy.accepted).toBe(0);
    await proxy.up();
    const ready = await waiting;
    expect(ready.waitedS).toBeGreaterThanOrEqual(2);
    expect((Date.now() - started) / 1000).toBeLessThan(10);
  });

  it("never takes a server another CA vouches for as ready, and names it when it gives up", async () => {
    const started = Date.now();
    await expect(
      waitForApiServer(kubeconfigWith({ server: proxied, caPem: TEST_CA_CERT }), {
        timeoutS: 3,
        retryMs: 200,
      }),
    ).rejects.toThrow(
      new RegExp(
        `^the API server at ${proxied} was not ready within 3 s \\(${proxied}/readyz, last: [A-Z_]*(SIGNATURE|SELF_SIGNED|ISSUER)[A-Z_]*\\); check that the control plane machine booted`,
      ),
    );
    expect((Date.now() - started) / 1000).toBeLessThan(6);
    // It did connect: the refusal was the certificate's, not the network's.
    expect(proxy.accepted).toBeGreaterThan(0);
  });

  it("gives up in its bound with an error naming the endpoint when nothing listens", async () => {
    await proxy.cut();
    const started = Date.now();
    await expect(
      waitForApiServer(kubeconfigWith({ server: proxied }), { timeoutS: 3, retryMs: 200 }),
    ).rejects.toThrow(
      `the API server at ${proxied} was not ready within 3 s (${proxied}/readyz, last: ECONNREFUSED); check that the control plane machine booted (its console output shows the bootstrap script's log) and that this machine's address is in environment.apiAccessCidrs`,
    );
    const took = (Date.now() - started) / 1000;
    expect(took).toBeGreaterThanOrEqual(3);
    expect(took).toBeLessThan(6);
  });

  it("refuses a kubeconfig without a CA to pin", async () => {
    const kc = JSON.parse(kubeconfigWith()) as KubeconfigJson;
    delete kc.clusters[0]!.cluster["certificate-authority-data"];
    await expect(waitForApiServer(JSON.stringify(kc), { timeoutS: 3 })).rejects.toThrow(
      "names no certificate authority; give it the cluster's CA",
    );
  });

  it("is what the ApiServerReady provider runs, loading the wait's module by its path", async () => {
    const provider = apiServerReadyProvider(WAIT_MODULE);
    const made = await provider.create({
      kubeconfig: kubeconfigWith({ server: proxied }),
      machines: ["i-1"],
    });
    expect(made.outs).toEqual({ server: proxied, machines: ["i-1"], waitedS: expect.any(Number) });
    // No credential in its outputs: the kubeconfig stays a (secret) input.
    expect(JSON.stringify(made.outs)).not.toContain("certificate");
    // The same machines: nothing to do; another machine: made again, so it waits again.
    const olds = made.outs as { machines: string[] };
    expect(await provider.diff!(made.id, olds, { kubeconfig: "", machines: ["i-1"] })).toEqual({
      changes: false,
    });
    expect(await provider.diff!(made.id, olds, { kubeconfig: "", machines: ["i-2"] })).toEqual({
      changes: true,
      replaces: ["machines"],
    });
  });
});

describe("ApiServerReady through the real engine", () => {
  const apiServer = new URL(testKubeConfig().getCurrentCluster()!.server);
  const project = "plb-api-ready";
  let proxy: TcpProxy;
  let stack: TestStack;

  beforeAll(async () => {
    proxy = new TcpProxy({ host: apiServer.hostname, port: Number(apiServer.port) });
    const proxied = `https://127.0.0.1:${await proxy.up()}`;
    stack = await TestStack.create({
      program: join(__dirname, "..", "fixtures", "apiServerReady", "index.ts"),
      projectName: project,
      config: { [`${project}:machines`]: ["i-1"], [`${project}:timeoutS`]: 4 },
      secrets: { [`${project}:kubeconfig`]: kubeconfigWith({ server: proxied }) },
    });
  });
  afterAll(async () => {
    await stack?.stack.destroy().catch(() => undefined);
    await stack?.dispose();
    await proxy?.cut();
  });

  it("is created once the API server is ready, keeps the credentials encrypted, and waits no more", async () => {
    const up = await stack.stack.up();
    expect(up.outputs.server!.value).toBe(`https://127.0.0.1:${proxy.port}`);
    expect(up.outputs.waitedS!.value).toBeLessThan(4);
    // The kubeconfig is a secret input (encrypted in state); the outputs hold no credential.
    const deployment = (await stack.stack.exportStack()).deployment as {
      resources: { type: string; inputs: Record<string, unknown>; outputs: Record<string, unknown> }[];
    };
    const ready = deployment.resources.find((r) => r.type.endsWith(":ApiServerReady"))!;
    expect(ready.inputs.kubeconfig).toHaveProperty(
      ["4dabf18193072939515e22adb298388d"],
      "1b47061264138c4ac30d75fd1eb44270",
    );
    expect(Object.keys(ready.outputs).sort()).toEqual(["__provider", "machines", "server", "waitedS"]);
    // Nothing changed: no wait, even with the API server gone.
    await proxy.cut();
    const again = await stack.stack.up();
    expect(again.summary.resourceChanges).toEqual({ same: 2 });
  });

  it("fails `pulumi up` naming the endpoint when a new machine's API server never answers", async () => {
    await proxy.cut();
    await stack.stack.setConfig(`${project}:machines`, { value: JSON.stringify(["i-2"]) });
    const started = Date.now();
    await expect(stack.stack.up()).rejects.toThrow(
      `the API server at https://127.0.0.1:${proxy.port} was not ready within 4 s (https://127.0.0.1:${proxy.port}/readyz, last: ECONNREFUSED)`,
    );
    expect((Date.now() - started) / 1000).toBeLessThan(60);
  });
});
