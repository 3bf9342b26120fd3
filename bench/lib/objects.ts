// The benchmark's Kubernetes objects: Service i of type LoadBalancer with one port and its VIP
// already in status (as the allocator would have recorded it), and one EndpointSlice of ten pod
// addresses. Written with bounded concurrency: the API server and etcd share this machine's cores.
import type { CoreV1Api, DiscoveryV1Api, V1EndpointSlice, V1Service } from "@kubernetes/client-node";

export const ENDPOINTS_PER_SERVICE = 10;
export const VIP_POOL = "10.1.0.0/16";
export const POD_CIDR = "10.244.0.0/16";
export const SERVICE_PORT = 80;
export const TARGET_PORT = 8080;
const MAX_SERVICES = 65_536; // one VIP each in VIP_POOL

export function serviceName(i: number): string {
  return `svc-${String(i).padStart(5, "0")}`;
}

export function vipOf(i: number): string {
  return `10.1.${i >> 8}.${i & 255}`;
}

/** Endpoint j of Service i; distinct within a slice (Services may share pods' addresses). */
export function podAddress(i: number, j: number): string {
  const n = (i * ENDPOINTS_PER_SERVICE + j) % 65_536;
  return `10.244.${n >> 8}.${n & 255}`;
}

export function service(i: number, loadBalancerClass: string): V1Service {
  return {
    metadata: { name: serviceName(i) },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass,
      // Node ports would run out long before 10,000 Services; the LB does not use them.
      allocateLoadBalancerNodePorts: false,
      ports: [{ name: "http", port: SERVICE_PORT, protocol: "TCP" }],
    },
  };
}

/** Service i's slice; `ready[j]` false marks endpoint j not ready (no longer a backend). */
export function endpointSlice(i: number, ready: readonly boolean[] = []): V1EndpointSlice {
  return {
    metadata: {
      name: serviceName(i),
      labels: {
        "kubernetes.io/service-name": serviceName(i),
        "endpointslice.kubernetes.io/managed-by": "bench.portable-lb.io",
      },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: TARGET_PORT, protocol: "TCP" }],
    endpoints: Array.from({ length: ENDPOINTS_PER_SERVICE }, (_, j) => {
      const isReady = ready[j] ?? true;
      return {
        addresses: [podAddress(i, j)],
        conditions: { ready: isReady, serving: isReady, terminating: false },
      };
    }),
  };
}

/** Creates Service i (with its VIP in status) and its EndpointSlice. */
export async function createServiceWithSlice(
  api: { core: CoreV1Api; discovery: DiscoveryV1Api },
  namespace: string,
  loadBalancerClass: string,
  i: number,
): Promise<void> {
  if (i >= MAX_SERVICES) throw new Error(`at most ${MAX_SERVICES} Services fit the VIP pool ${VIP_POOL}`);
  const created = await api.core.createNamespacedService({ namespace, body: service(i, loadBalancerClass) });
  await api.core.replaceNamespacedServiceStatus({
    name: serviceName(i),
    namespace,
    body: { ...created, status: { loadBalancer: { ingress: [{ ip: vipOf(i), ipMode: "VIP" }] } } },
  });
  await api.discovery.createNamespacedEndpointSlice({ namespace, body: endpointSlice(i) });
}

/**
 * Runs `work(i)` for i in [from, to) with at most `limit` in flight; `progress` is called with the
 * number done after each one.
 */
export async function boundedRange(
  from: number,
  to: number,
  limit: number,
  work: (i: number) => Promise<void>,
  progress: (done: number) => void,
): Promise<void> {
  let next = from;
  let done = 0;
  const worker = async () => {
    while (next < to) {
      const i = next++;
      await work(i);
      progress(++done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, to - from) }, worker));
}
