// A lab node's KubeProxyConfiguration: nftables mode (this kernel has no IPVS), inside the node's
// network namespace, touching nothing machine-wide.
export interface KubeProxyConfigInput {
  nodeName: string;
  kubeconfig: string;
  /** The cluster's pod CIDR: traffic from outside it to a Service is masqueraded. */
  clusterCidr: string;
}

export function kubeProxyConfig({ nodeName, kubeconfig, clusterCidr }: KubeProxyConfigInput): string {
  return JSON.stringify(
    {
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      mode: "nftables",
      hostnameOverride: nodeName,
      clientConnection: { kubeconfig },
      clusterCIDR: clusterCidr,
      healthzBindAddress: "127.0.0.1:10256",
      metricsBindAddress: "127.0.0.1:10249",
      // nf_conntrack_max is machine-wide: leave it and the conntrack timeouts as they are.
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: "0s", tcpCloseWaitTimeout: "0s" },
      // A negative oom_score_adj needs CAP_SYS_RESOURCE, which root lacks here.
      oomScoreAdj: 0,
    },
    null,
    2,
  );
}
