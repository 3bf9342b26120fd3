// A LoadBalancer Service of a given class with one EndpointSlice of ready backends, as the BGP
// tests and benchmarks create them (no kube-controller-manager runs: the slice is written directly).
import { CoreV1Api, DiscoveryV1Api, type KubeConfig } from "@kubernetes/client-node";
import { lbService, slice } from "../../lb-image/src/controller/testing/k8sObjects.ts";

export async function createLbService(
  kc: KubeConfig,
  namespace: string,
  name: string,
  loadBalancerClass: string,
  backends: { ip: string; nodeName?: string; ready?: boolean }[],
  opts: {
    /** The Service's port and the backends' (equal, as direct server return needs); default 80 -> 8080. */
    port?: number;
    annotations?: Record<string, string>;
    /** The Service's pod selector (NetworkPolicies are matched against it); none by default. */
    selector?: Record<string, string>;
  } = {},
): Promise<void> {
  const { port, annotations, selector } = opts;
  const ports = port === undefined ? undefined : [{ name: "http", port, protocol: "TCP" }];
  await kc.makeApiClient(CoreV1Api).createNamespacedService({
    namespace,
    body: {
      ...lbService(name, { ns: namespace, class: loadBalancerClass, ports, annotations, selector }),
      status: {},
    },
  });
  await kc
    .makeApiClient(DiscoveryV1Api)
    .createNamespacedEndpointSlice({ namespace, body: slice(name, backends, { ns: namespace, name, port }) });
}
