// PortableCluster arguments the tests start from: a BGP platform on a small node network.
import type { PortableClusterArgs } from "../cluster/portableCluster.ts";
import type { ClusterEnvironment } from "../environment.ts";
import type { Platform } from "../platform.ts";

export const network = {
  nodeCidr: "10.0.0.0/24",
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
};
export const env = (
  platform: Platform,
  routers?: string[],
  extra: Partial<ClusterEnvironment> = {},
): ClusterEnvironment => ({
  kind: "kubeconfig",
  platform,
  kubeconfig: "apiVersion: v1\nkind: Config\n",
  ...(routers && { bgp: { routers } }),
  ...extra,
});
export const bgpArgs = (platform: Platform): PortableClusterArgs => ({
  environment: env(platform, ["10.0.0.1"]),
  // A copy: tests change it.
  network: structuredClone(network),
  loadBalancer: {
    replicas: 3,
    image: "registry.example/portable-lb/lb:1",
    bgp: { asn: 64512 },
    routeReflectors: [
      { node: "rr1", address: "10.0.0.5" },
      { node: "rr2", address: "10.0.0.6" },
    ],
  },
});
