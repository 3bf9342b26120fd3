// A lab node's containerd configuration: its own root, state, socket and runc root, the CRI plugin
// with runc on cgroupfs, and the CNI wiring the kubelet's pod CIDR into pods' addresses.
import type { NodeLayout } from "./nodeLayout.ts";

export interface ContainerdConfigInput {
  layout: NodeLayout;
  /** The sandbox (pause) image, by exactly the name it was imported under. */
  sandboxImage: string;
  /** Folder of the CNI plugins (bridge, host-local, loopback, portmap). */
  cniBinDir: string;
}

const CRI = 'plugins."io.containerd.grpc.v1.cri"';

export function containerdConfig({ layout, sandboxImage, cniBinDir }: ContainerdConfigInput): string {
  const s = JSON.stringify; // a JSON string is a valid TOML basic string
  return [
    "version = 2",
    `root = ${s(layout.containerdRoot)}`,
    `state = ${s(layout.containerdState)}`,
    // Snapshotters and tracing this machine has no use for; they would only log failures.
    `disabled_plugins = ${s([
      "io.containerd.snapshotter.v1.aufs",
      "io.containerd.snapshotter.v1.btrfs",
      "io.containerd.snapshotter.v1.devmapper",
      "io.containerd.snapshotter.v1.zfs",
      "io.containerd.tracing.processor.v1.otlp",
      "io.containerd.internal.v1.tracing",
    ])}`,
    "",
    "[grpc]",
    `  address = ${s(layout.containerdSocket)}`,
    "[debug]",
    '  address = ""',
    "[metrics]",
    '  address = ""',
    "",
    // Its default (/opt/containerd) is shared by every containerd on the machine.
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${s(`${layout.containerdRoot}/opt`)}`,
    "",
    `[${CRI}]`,
    `  sandbox_image = ${s(sandboxImage)}`,
    // Root here lacks CAP_SYS_RESOURCE: no process may get a lower oom_score_adj than containerd's.
    "  restrict_oom_score_adj = true",
    // Pods' network namespaces go to /run/netns, the runtimes' usual place: the node's own /run
    // (nodeMountNamespace.ts), so the DSR node agent finds them where it would on any node.
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    `  [${CRI}.containerd]`,
    '    snapshotter = "overlayfs"',
    '    default_runtime_name = "runc"',
    `    [${CRI}.containerd.runtimes.runc]`,
    '      runtime_type = "io.containerd.runc.v2"',
    `      [${CRI}.containerd.runtimes.runc.options]`,
    // crun refuses this machine's cgroup v1/v2 hybrid; runc works. Its root defaults to a folder
    // every containerd shares.
    '        BinaryName = "runc"',
    `        Root = ${s(layout.runcRoot)}`,
    "        SystemdCgroup = false",
    `  [${CRI}.cni]`,
    `    bin_dir = ${s(cniBinDir)}`,
    `    conf_dir = ${s(layout.cniConfDir)}`,
    // containerd writes conf_dir's network from this once the kubelet tells it the node's pod CIDR.
    `    conf_template = ${s(layout.cniTemplate)}`,
    "",
  ].join("\n");
}

/**
 * The pod network: a bridge (cni0) in the node's namespace as the pods' gateway, addresses from the
 * node's pod CIDR (`{{.PodCIDR}}`, filled in by containerd), port mappings for hostPort.
 */
export function cniTemplate(layout: NodeLayout): string {
  return JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: "portable-lb-pods",
      plugins: [
        {
          type: "bridge",
          bridge: "cni0",
          isGateway: true,
          hairpinMode: true,
          // Pods reach the node network routed, not masqueraded: their addresses are the lab's.
          ipMasq: false,
          ipam: {
            type: "host-local",
            ranges: [[{ subnet: "{{.PodCIDR}}" }]],
            routes: [{ dst: "0.0.0.0/0" }],
            // Its default (/var/lib/cni/networks) is shared by every node on the machine.
            dataDir: layout.cniIpamDir,
          },
        },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}
