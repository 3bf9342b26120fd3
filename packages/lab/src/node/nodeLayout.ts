// Where one lab node keeps its state: every path its containerd, kubelet and kube-proxy use lies
// under the node's own folder (or is named after the node), so nodes never share a file, a socket or
// a cgroup, and removing the node removes all of it.
import { join } from "node:path";
import { nodeCgroupRoot } from "./nodeCgroups.ts";

/** Linux limit for a unix socket path (sun_path is 108 bytes, with its NUL). */
const MAX_SOCKET_PATH = 107;
const NODE_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export interface NodeLayout {
  /** The node's Kubernetes name (also its kubelet's hostname). */
  name: string;
  dir: string;
  /** The cgroup (in every cgroup v1 hierarchy) the kubelet puts its pods under. */
  cgroupRoot: string;
  sysctlShadows: string;
  /** The node's /var/log (the kubelet's /var/log/containers links). */
  varLog: string;
  containerdRoot: string;
  containerdState: string;
  containerdSocket: string;
  containerdConfig: string;
  runcRoot: string;
  cniConfDir: string;
  cniTemplate: string;
  cniIpamDir: string;
  kubeletRoot: string;
  kubeletConfig: string;
  kubeletKubeconfig: string;
  podLogs: string;
  kubeProxyConfig: string;
  kubeProxyKubeconfig: string;
  logs: string;
}

export class NodeLayoutError extends Error {}

/**
 * The layout of node `name` under `dir`; `scope` (e.g. the lab's id) keeps cgroups of labs that
 * reuse node names apart.
 */
export function nodeLayout(dir: string, name: string, scope: string): NodeLayout {
  if (!NODE_NAME.test(name))
    throw new NodeLayoutError(
      `node name '${name}' must be a DNS label (1-63 characters of a-z, 0-9 and '-'): give the node such a name`,
    );
  // No '-': the reaper reads the scope back from the cgroup's name.
  if (!/^[a-z0-9]{1,40}$/.test(scope))
    throw new NodeLayoutError(`node scope '${scope}' must be 1-40 characters of a-z and 0-9`);
  const containerdSocket = join(dir, "containerd.sock");
  // containerd also listens on `<socket>.ttrpc`.
  if (`${containerdSocket}.ttrpc`.length > MAX_SOCKET_PATH)
    throw new NodeLayoutError(
      `node ${name}: its containerd socket ${containerdSocket}.ttrpc is longer than ${MAX_SOCKET_PATH} characters; give the node a shorter folder`,
    );
  return {
    name,
    dir,
    cgroupRoot: nodeCgroupRoot(scope, name),
    sysctlShadows: join(dir, "sysctl"),
    varLog: join(dir, "var-log"),
    containerdRoot: join(dir, "containerd", "root"),
    containerdState: join(dir, "containerd", "state"),
    containerdSocket,
    containerdConfig: join(dir, "containerd", "config.toml"),
    runcRoot: join(dir, "containerd", "runc"),
    cniConfDir: join(dir, "cni", "net.d"),
    cniTemplate: join(dir, "cni", "template.conflist"),
    cniIpamDir: join(dir, "cni", "ipam"),
    kubeletRoot: join(dir, "kubelet"),
    kubeletConfig: join(dir, "kubelet.json"),
    kubeletKubeconfig: join(dir, "kubelet.kubeconfig"),
    podLogs: join(dir, "pod-logs"),
    kubeProxyConfig: join(dir, "kube-proxy.json"),
    kubeProxyKubeconfig: join(dir, "kube-proxy.kubeconfig"),
    logs: join(dir, "logs"),
  };
}
