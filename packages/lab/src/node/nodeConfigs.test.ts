import { cniTemplate, containerdConfig } from "./containerdConfig.ts";
import { kubeletConfig } from "./kubeletConfig.ts";
import { kubeProxyConfig } from "./kubeProxyConfig.ts";
import { cgroupMounts } from "./nodeCgroups.ts";
import { nodeLayout } from "./nodeLayout.ts";

const layout = nodeLayout("/lab/n1", "n1", "pl1");

describe("a lab node's configuration", () => {
  it("gives containerd its own paths, runc with its own root, restricted oom_score_adj and the pause image", () => {
    const toml = containerdConfig({ layout, sandboxImage: "localhost/p:1", cniBinDir: "/cni" });
    for (const line of [
      'root = "/lab/n1/containerd/root"',
      'state = "/lab/n1/containerd/state"',
      'address = "/lab/n1/containerd.sock"',
      'sandbox_image = "localhost/p:1"',
      "restrict_oom_score_adj = true",
      'Root = "/lab/n1/containerd/runc"',
      "SystemdCgroup = false",
      'bin_dir = "/cni"',
      'conf_template = "/lab/n1/cni/template.conflist"',
    ])
      expect(toml).toContain(line);
    // Pods' namespaces where runtimes usually keep them (the node's own /run): the DSR node agent's default.
    expect(toml).not.toContain("netns_mounts_under_state_dir");
  });

  it("fills pod addresses from the node's pod CIDR with the node's own IPAM folder", () => {
    const t = JSON.parse(cniTemplate(layout));
    expect(t.plugins[0].ipam).toMatchObject({
      ranges: [[{ subnet: "{{.PodCIDR}}" }]],
      dataDir: "/lab/n1/cni/ipam",
    });
  });

  it("runs the kubelet on cgroupfs under the node's cgroup root, never writing kernel settings", () => {
    const c = JSON.parse(
      kubeletConfig({ layout, clientCaFile: "/ca.crt", taints: [{ key: "k", effect: "NoExecute" }] }),
    );
    expect(c).toMatchObject({
      cgroupDriver: "cgroupfs",
      cgroupRoot: "/portable-lb-pl1-n1",
      failCgroupV1: false,
      failSwapOn: false,
      protectKernelDefaults: true,
      containerRuntimeEndpoint: "unix:///lab/n1/containerd.sock",
      registerWithTaints: [{ key: "k", effect: "NoExecute" }],
      imageGCHighThresholdPercent: 100,
    });
    // No cluster DNS named: pods resolve as the node does.
    expect(c).not.toHaveProperty("clusterDNS");
  });

  it("names the cluster DNS Service for pods of dnsPolicy ClusterFirst", () => {
    const c = JSON.parse(kubeletConfig({ layout, clientCaFile: "/ca.crt", clusterDns: ["10.96.0.10"] }));
    expect(c).toMatchObject({ clusterDNS: ["10.96.0.10"], clusterDomain: "cluster.local" });
  });

  it("runs kube-proxy in nftables mode without machine-wide conntrack settings", () => {
    const c = JSON.parse(kubeProxyConfig({ nodeName: "n1", kubeconfig: "/k", clusterCidr: "10.244.0.0/16" }));
    expect(c).toMatchObject({
      mode: "nftables",
      conntrack: { maxPerCore: 0, min: 0 },
      hostnameOverride: "n1",
    });
  });

  it("finds the cgroup v1 and v2 hierarchies in mountinfo", () => {
    const mountinfo = [
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
      "42 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw",
    ].join("\n");
    expect(cgroupMounts(mountinfo)).toEqual(["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified"]);
  });
});
