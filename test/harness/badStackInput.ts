// A new user's first try at the root program's settings (issue 17): seven mistakes in five
// settings, and the problems the program must report for them, all at once and in this order.
// Shared by the unit test of stackInput.ts and the real-engine preview test.

/** The mistaken settings, by key under `portable-lb:`; `notKubeconfig` is a file that is not one. */
export function firstTrySettings(notKubeconfig: string): Record<string, unknown> {
  return {
    environment: {
      kind: "kubeconfig",
      kubeconfig: notKubeconfig,
      bgp: { routers: ["10.0.0.1"] },
      lbNodeCount: 2,
    },
    network: {
      nodeCidr: "10.0.0.0/24",
      podCidr: "10.244.0.0/16",
      serviceCidr: "10.96.0.0/16",
      vipPools: [{ name: "web", cidr: "fd00::/64" }],
    },
    loadBalancer: {
      replicas: 3,
      image: "registry.example.com/portable-lb/lb:1",
      dataplane: { engine: "nftables" },
      bgp: { asn: 64512, bfd: { minRxMs: -100 } },
      routeReflectors: [{ node: "rr1", address: "10.0.0.5" }],
    },
    flannel: { backnd: "udp" },
    loadbalancer: "oops",
  };
}

export function firstTryProblems(notKubeconfig: string): string[] {
  return [
    'loadbalancer: is not a portable-lb setting; did you mean "loadBalancer"?',
    `environment.kubeconfig: ${notKubeconfig} is not a kubeconfig (it has no current-context whose cluster names a server); point it at your cluster's kubeconfig, e.g. ~/.kube/config (got "${notKubeconfig}")`,
    'network.vipPools[0].cidr: IPv6 is not supported yet; use an IPv4 prefix like 10.0.0.0/24 (got "fd00::/64")',
    'flannel.backnd: is not a known key; did you mean "backend"? (got "udp")',
    "loadBalancer.bgp.bfd.minRxMs: must be a whole number from 10 to 10000 (got -100)",
    'loadBalancer.dataplane: is not a known key; did you mean "dataPlane"? (got {"engine":"nftables"})',
    "loadBalancer.replicas: 3 LB pods need 3 LB nodes (one pod per node) but only 2 are labelled; label more nodes or lower replicas (got 3)",
  ];
}
