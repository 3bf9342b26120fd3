// A lab node's KubeletConfiguration: a real kubelet sharing a machine with other nodes and other
// work. What differs from a dedicated host, and why, is said beside each field.
import type { NodeLayout } from "./nodeLayout.ts";

export interface Taint {
  key: string;
  value?: string;
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

export interface KubeletConfigInput {
  layout: NodeLayout;
  /** The control plane's CA: clients of the kubelet's API (the API server) present certificates from it. */
  clientCaFile: string;
  taints?: Taint[];
  /** Sysctls outside Kubernetes' safe set that pods on this node may set (the LB nodes': LB_POD_SYSCTLS). */
  allowedUnsafeSysctls?: string[];
  /** Pods the node admits; default 110 as upstream. */
  maxPods?: number;
  /** The cluster DNS Service's addresses, for pods of dnsPolicy ClusterFirst (none: the node's resolver). */
  clusterDns?: string[];
}

/** The kubelet's configuration file, as JSON (which the kubelet reads as YAML). */
export function kubeletConfig({
  layout,
  clientCaFile,
  taints = [],
  allowedUnsafeSysctls = [],
  maxPods = 110,
  clusterDns = [],
}: KubeletConfigInput): string {
  return JSON.stringify(
    {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      containerRuntimeEndpoint: `unix://${layout.containerdSocket}`,
      // Its own hierarchy in every cgroup v1 controller; cgroupfs, as there is no systemd here.
      cgroupDriver: "cgroupfs",
      cgroupRoot: layout.cgroupRoot,
      cgroupsPerQOS: true,
      enforceNodeAllocatable: ["pods"],
      // The machine's cgroups are a v1/v2 hybrid: v1 controllers only.
      failCgroupV1: false,
      failSwapOn: false,
      // The kubelet wants kernel.panic*, vm.overcommit_memory and keyring limits of its own choosing
      // and, unprotected, writes them machine-wide. Its mount namespace shows it shadow files with
      // those values (nodeMountNamespace.ts), so with protection on it checks them and never writes.
      protectKernelDefaults: true,
      // A negative oom_score_adj needs CAP_SYS_RESOURCE, which root lacks here.
      oomScoreAdj: 0,
      podLogsDir: layout.podLogs,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: clientCaFile },
      },
      authorization: { mode: "Webhook" },
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      // A shared disk and memory: evict only when the machine is nearly out, and never collect our
      // imported images (no registry could bring them back).
      evictionHard: {
        "memory.available": "100Mi",
        "nodefs.available": "1%",
        "nodefs.inodesFree": "1%",
        "imagefs.available": "1%",
        "imagefs.inodesFree": "1%",
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      registerWithTaints: taints,
      allowedUnsafeSysctls,
      maxPods,
      // No cluster DNS in the lab.
      resolvConf: "/etc/resolv.conf",
      ...(clusterDns.length > 0 && { clusterDNS: clusterDns, clusterDomain: "cluster.local" }),
    },
    null,
    2,
  );
}
