// examples/python-app-stack through the real engine against the run's kube-apiserver: a stand-in
// platform stack (test/fixtures/standInPlatform: only the outputs an app reads) and the real LB
// controller, programming nftables in a network namespace, which gives the Service its VIP. The
// app's LoadBalancerService comes from the generated Python SDK and is built by the plugin. No
// kubelet runs here, so the app runs with no replicas: the Service is what is under test.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { lbConfigSchema, VIP_POOL_ANNOTATION, type VipPool } from "@portable-lb/core/config";
import type { LabNamespace, NetnsLab } from "@portable-lb/lab";
import type { RunningController } from "../../lb-image/src/controller/controller.ts";
import { gatewayLab } from "../harness/netns/gatewayLab.ts";
import { startNetnsController } from "../harness/netns/netnsController.ts";
import { createPythonAppStack, upPythonAppStack } from "../harness/pythonAppStack.ts";
import { testKubeConfig, testKubeconfig } from "../harness/testEnv.ts";
import { TestStack } from "../harness/testStack.ts";

const CONTROLLER_NS = `pyapp-lb-${process.pid}`;
const POOLS: VipPool[] = [{ name: "web", cidr: "10.1.7.0/24", avoidBuggyIps: true }];
// A class of its own: the other tests' controllers, on the same API server, leave its Services alone.
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/python-app",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: POOLS,
  dataPlane: { engine: "nftables" },
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
});
const UP_MS = 240_000;
const IMAGE = "registry.example.com/shop/web:1";

const core = testKubeConfig().makeApiClient(CoreV1Api);
let lab: NetnsLab;
let lbNs: LabNamespace;
let controller: RunningController | undefined;
let platform: TestStack;

beforeAll(async () => {
  ({ lab, gateway: lbNs } = await gatewayLab("pyapp", {
    gateway: "lb",
    clientNet: "10.10.0",
    bridge: { name: "pods", address: "10.244.0.1/24" },
    hosts: [],
  }));
  await core.createNamespace({ body: { metadata: { name: CONTROLLER_NS } } });
  controller = await startNetnsController({
    config,
    kubeconfig: testKubeConfig(),
    namespace: CONTROLLER_NS,
    pod: lbNs,
  });
  platform = await TestStack.create({
    program: join(__dirname, "..", "fixtures", "standInPlatform", "index.ts"),
    projectName: "plb-stand-in",
    stackName: "platform",
    config: { "plb-stand-in:loadBalancerClass": config.loadBalancerClass, "plb-stand-in:vipPools": POOLS },
    secrets: { "plb-stand-in:kubeconfig": readFileSync(testKubeconfig(), "utf8") },
  });
  expect((await platform.stack.up({ color: "never" })).summary.result).toBe("succeeded");
}, UP_MS);

afterAll(async () => {
  await platform?.stack.destroy({ color: "never" }).catch(() => undefined);
  await platform?.dispose();
  await controller?.stop();
  await core.deleteNamespace({ name: CONTROLLER_NS }).catch(() => undefined);
  await lab?.destroy();
});

const appOptions = async (settings: Record<string, unknown>) => ({
  platform: await platform.qualifiedName(),
  backendDir: platform.stateDir,
  image: IMAGE,
  settings,
});

describe("the Python app stack, on a stand-in platform", () => {
  it(
    "gets its Service a VIP from the platform's pool, with the platform's class; a second up changes nothing",
    async () => {
      const started = Date.now();
      const app = await upPythonAppStack(await appOptions({ replicas: 0 }), {
        color: "never",
        signal: AbortSignal.timeout(UP_MS),
      });
      try {
        const upS = (Date.now() - started) / 1000;
        const vip = app.outputs.vip!.value as string;
        expect(vip).toMatch(/^10\.1\.7\.\d+$/);
        expect(app.outputs.url!.value).toBe(`http://${vip}/`);
        const svc = await core.readNamespacedService({ name: "web", namespace: "shop-py" });
        expect({
          class: svc.spec?.loadBalancerClass,
          pool: svc.metadata?.annotations?.[VIP_POOL_ANNOTATION],
          type: svc.spec?.type,
          selector: svc.spec?.selector,
          ports: svc.spec?.ports?.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort })),
          ingress: svc.status?.loadBalancer?.ingress?.map((i) => i.ip),
        }).toEqual({
          class: "portable-lb.io/python-app",
          pool: "web",
          type: "LoadBalancer",
          selector: { app: "web" },
          ports: [{ name: "http", port: 80, targetPort: 80 }],
          ingress: [vip],
        });
        // The component the Python program declared, built in the plugin around core's.
        const types = (await app.stack.stack.exportStack()).deployment.resources.map(
          (r: { type: string }) => r.type,
        );
        expect(types).toEqual(
          expect.arrayContaining([
            "portable-lb:index:LoadBalancerService",
            "portable-lb:core:LoadBalancerService",
          ]),
        );

        const againStarted = Date.now();
        const again = await app.stack.stack.up({ color: "never", signal: AbortSignal.timeout(UP_MS) });
        expect(Object.keys(again.summary.resourceChanges ?? {})).toEqual(["same"]);
        console.log(
          `python app stack: up in ${upS.toFixed(0)} s (SDK made, stack created), again in ${((Date.now() - againStarted) / 1000).toFixed(0)} s`,
        );
      } finally {
        await app.destroy({ color: "never", signal: AbortSignal.timeout(UP_MS) });
      }
      await expect(core.readNamespacedService({ name: "web", namespace: "shop-py" })).rejects.toThrow();
    },
    3 * UP_MS,
  );

  it(
    "fails its preview naming a pool the platform lacks, as the TypeScript app does",
    async () => {
      const app = await createPythonAppStack({
        ...(await appOptions({ pool: "internal" })),
        stackName: "bad-pool",
      });
      try {
        let output = "";
        await expect(
          app.stack.stack.preview({
            color: "never",
            onOutput: (o) => (output += o),
            signal: AbortSignal.timeout(UP_MS),
          }),
        ).rejects.toThrow();
        // Core's own check, raised in the plugin and named by the engine. (Python's SDK then adds a
        // traceback of its own: "resource monitor shut down".)
        expect(output).toContain(
          `error: portable-lb:index:LoadBalancerService resource 'web' has a problem: service.pool: no such VIP pool (got "internal"); use one of: web`,
        );
      } finally {
        await app.dispose();
      }
    },
    UP_MS,
  );
});
