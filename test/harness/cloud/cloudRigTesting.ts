// Jest glue for the cloud-routes rigs: the options every test's rig starts from (the run's control
// plane, a namespace and a load-balancer class of its own), an afterEach that shows the LB pods'
// logs when a test failed, a proxy to the API server to cut, and the fail-static case both clouds run.
import { TcpProxy } from "../tcpProxy.ts";
import { testKubeConfig, testKubeconfig, TEST_ENV } from "../testEnv.ts";
import type { CloudRouteRig, RigOptions } from "./cloudRouteRig.ts";

export function rigBase(
  namespace: string,
  loadBalancerClass: string,
): Pick<RigOptions, "kubeconfig" | "kubeconfigPath" | "namespace" | "loadBalancerClass"> {
  return { kubeconfig: testKubeConfig(), kubeconfigPath: testKubeconfig(), namespace, loadBalancerClass };
}

/**
 * After each failed test, the last lines each LB pod's process logged; after all, the rig torn
 * down and the API server proxy (if any) closed.
 */
export function afterRig(
  rig: CloudRouteRig & { teardown(): Promise<void> },
  proxy?: () => TcpProxy | undefined,
) {
  afterAll(async () => {
    await rig.teardown();
    await proxy?.()?.cut();
  }, 30_000);
  afterEach(() => {
    const { assertionCalls, numPassingAsserts } = expect.getState();
    if (assertionCalls !== numPassingAsserts)
      for (const pod of rig.o.pods) console.log(`--- ${pod}\n${rig.output(pod).slice(-4000)}`);
  });
}

/** A proxy to the run's API server that a test can cut (the LB pods are pointed at it). */
export async function apiServerProxy(): Promise<TcpProxy> {
  const server = new URL(process.env[TEST_ENV.server]!);
  const proxy = new TcpProxy({ host: server.hostname, port: Number(server.port) });
  await proxy.up();
  return proxy;
}

/**
 * Fail static: every pod restarted behind `proxy`; once routed, the proxy is cut and a pod dies
 * too; past twice the Lease's duration the routes (`snapshot`) are as they were; once the API
 * server is back, the others route without the dead pod.
 */
export async function expectFailStatic(
  rig: CloudRouteRig & { start(pod: string, o: { server: string }): void },
  proxy: TcpProxy,
  o: { routed: (live: string[]) => Promise<boolean>; snapshot: () => Promise<unknown>; dies: string },
): Promise<void> {
  const { pods } = rig.o;
  for (const pod of pods) await rig.stop(pod, "SIGTERM");
  const server = `https://127.0.0.1:${proxy.port}`;
  pods.forEach((pod) => rig.start(pod, { server }));
  expect(await rig.running(pods)).toBe(true);
  expect(await o.routed(pods)).toBe(true);
  const before = await o.snapshot();
  await proxy.cut();
  await rig.stop(o.dies, "SIGKILL"); // a pod dies too while nobody can reach the API server
  await new Promise((r) => setTimeout(r, 8_000)); // past the Lease's duration, twice
  expect(await o.snapshot()).toEqual(before);
  await proxy.up();
  expect(await o.routed(pods.filter((p) => p !== o.dies))).toBe(true);
}
