import type * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { installMocks, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import type { Platform } from "../platform.ts";
import { ConfigError } from "../validation.ts";
import type { FlannelArgs } from "./flannel.ts";
import { Flannel } from "./flannel.ts";

const recorded = installMocks();

const children = (f: Flannel): pulumi.CustomResource[] => [
  f.systemNamespace.namespace,
  f.serviceAccount,
  f.clusterRole,
  f.clusterRoleBinding,
  f.configMap,
  f.daemonSet,
];

/** Builds a Flannel and waits until every child is registered, so `recorded` holds exactly its resources. */
async function build(args: Partial<FlannelArgs> = {}): Promise<Flannel> {
  recorded.length = 0;
  const flannel = new Flannel("net", { platform: "onprem", podCidr: "10.244.0.0/16", ...args });
  await Promise.all(children(flannel).map((r) => valueOf(r.id)));
  return flannel;
}

function inputsOf(type: string) {
  const matches = recorded.filter((r) => r.type === type);
  expect(matches).toHaveLength(1);
  return matches[0]!.inputs;
}

const daemonSetSpec = () =>
  inputsOf("kubernetes:apps/v1:DaemonSet").spec.template.spec as k8s.types.output.core.v1.PodSpec;
const configFile = (file: string): unknown =>
  JSON.parse(inputsOf("kubernetes:core/v1:ConfigMap").data[file] as string);

describe("Flannel", () => {
  it("creates one of each child, all parented to the component", async () => {
    const flannel = await build();

    expect(recorded.map((r) => `${r.type} ${r.name}`).sort()).toEqual([
      "kubernetes:apps/v1:DaemonSet net-ds",
      "kubernetes:core/v1:ConfigMap net-cfg",
      "kubernetes:core/v1:Namespace net-ns",
      "kubernetes:core/v1:ServiceAccount net-sa",
      "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole net-role",
      "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding net-binding",
      "portable-lb:core:Flannel net",
      "portable-lb:core:SystemNamespace net-ns",
    ]);
    // Mock URNs carry only the immediate parent's type, so the namespace is checked one level at a time.
    const direct = [flannel.systemNamespace, ...children(flannel).slice(1)];
    expect(await Promise.all(direct.map(typeChain))).toEqual([
      "portable-lb:core:Flannel$portable-lb:core:SystemNamespace",
      "portable-lb:core:Flannel$kubernetes:core/v1:ServiceAccount",
      "portable-lb:core:Flannel$kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
      "portable-lb:core:Flannel$kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
      "portable-lb:core:Flannel$kubernetes:core/v1:ConfigMap",
      "portable-lb:core:Flannel$kubernetes:apps/v1:DaemonSet",
    ]);
    expect(await typeChain(flannel.systemNamespace.namespace)).toBe(
      "portable-lb:core:SystemNamespace$kubernetes:core/v1:Namespace",
    );
  });

  it("puts flannel in a privileged, labelled kube-flannel namespace", async () => {
    const flannel = await build();

    expect(await valueOf(flannel.namespace)).toBe("kube-flannel");
    expect(inputsOf("kubernetes:core/v1:Namespace").metadata.labels).toMatchObject({
      "app.kubernetes.io/component": "flannel",
      "pod-security.kubernetes.io/enforce": "privileged",
    });
    for (const type of ["ServiceAccount", "ConfigMap"]) {
      expect(inputsOf(`kubernetes:core/v1:${type}`).metadata.namespace).toBe("kube-flannel");
    }
    expect(inputsOf("kubernetes:apps/v1:DaemonSet").metadata).toMatchObject({
      name: "kube-flannel-ds",
      namespace: "kube-flannel",
      labels: {
        "app.kubernetes.io/part-of": "portable-lb",
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "flannel",
        app: "flannel",
        tier: "node",
      },
    });
  });

  it("grants exactly upstream's kube-subnet-mgr RBAC to the flannel service account", async () => {
    await build({ namespace: "net-system" });

    const role = inputsOf("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole");
    expect(role.metadata.name).toBe("flannel");
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get"] },
      { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["nodes/status"], verbs: ["patch"] },
    ]);
    const binding = inputsOf("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding");
    expect(binding.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "flannel",
    });
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "flannel", namespace: "net-system" }]);
    expect(daemonSetSpec().serviceAccountName).toBe("flannel");
  });

  it.each<[Platform, string]>([
    ["onprem", "host-gw"],
    ["lab", "host-gw"],
    ["aws", "vxlan"],
    ["gcp", "vxlan"],
  ])("on %s writes net-conf.json with the %s backend", async (platform, backend) => {
    const flannel = await build({ platform });

    expect(flannel.backend).toBe(backend);
    expect(configFile("net-conf.json")).toEqual({
      Network: "10.244.0.0/16",
      EnableIPv4: true,
      Backend: { Type: backend },
    });
  });

  it("takes the pod CIDR as an output and passes VXLAN options through", async () => {
    await build({ platform: "aws", podCidr: pulumi.output("10.42.0.0/16"), vxlan: { vni: 7, port: 4789 } });

    expect(configFile("net-conf.json")).toEqual({
      Network: "10.42.0.0/16",
      EnableIPv4: true,
      Backend: { Type: "vxlan", VNI: 7, Port: 4789 },
    });
  });

  it("rolls flanneld when net-conf.json changes (config hash on the pod template)", async () => {
    const hash = () =>
      inputsOf("kubernetes:apps/v1:DaemonSet").spec.template.metadata.annotations[
        "portable-lb.io/config-hash"
      ];
    await build({ podCidr: "10.244.0.0/16" });
    const first = hash();
    await build({ podCidr: "10.244.0.0/16" });
    expect(hash()).toBe(first);
    await build({ podCidr: "10.42.0.0/16" });
    expect(hash()).toMatch(/^[0-9a-f]{16}$/);
    expect(hash()).not.toBe(first);
  });

  it("writes upstream's CNI conflist with portmap into kube-flannel-cfg", async () => {
    await build();

    const cfg = inputsOf("kubernetes:core/v1:ConfigMap");
    expect(cfg.metadata.name).toBe("kube-flannel-cfg");
    expect(configFile("cni-conf.json")).toEqual({
      name: "cbr0",
      cniVersion: "0.3.1",
      plugins: [
        { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
        { type: "portmap", capabilities: { portMappings: true } },
      ],
    });
  });

  it("runs flanneld on the host network with NET_ADMIN and NET_RAW only, never privileged", async () => {
    await build();

    const spec = daemonSetSpec();
    expect(spec).toMatchObject({
      hostNetwork: true,
      priorityClassName: "system-node-critical",
      tolerations: [{ operator: "Exists", effect: "NoSchedule" }],
      nodeSelector: { "kubernetes.io/os": "linux" },
    });
    expect(spec.containers).toHaveLength(1);
    const flanneld = spec.containers[0]!;
    expect(flanneld.command).toEqual(["/opt/bin/flanneld"]);
    expect(flanneld.args).toEqual(["--ip-masq", "--kube-subnet-mgr"]);
    expect(flanneld.securityContext).toEqual({
      privileged: false,
      capabilities: { add: ["NET_ADMIN", "NET_RAW"] },
    });
    expect(flanneld.resources).toEqual({ requests: { cpu: "100m", memory: "50Mi" } });
    expect(flanneld.env).toEqual([
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
      { name: "EVENT_QUEUE_DEPTH", value: "5000" },
    ]);
    expect(flanneld.volumeMounts.map((m) => m.name)).toEqual(["run", "flannel-cfg", "xtables-lock"]);
    expect(spec.volumes).toEqual([
      { name: "run", hostPath: { path: "/run/flannel" } },
      { name: "cni-plugin", hostPath: { path: "/opt/cni/bin" } },
      { name: "cni", hostPath: { path: "/etc/cni/net.d" } },
      { name: "flannel-cfg", configMap: { name: "kube-flannel-cfg" } },
      { name: "xtables-lock", hostPath: { path: "/run/xtables.lock", type: "FileOrCreate" } },
    ]);
    expect(inputsOf("kubernetes:apps/v1:DaemonSet").spec.selector).toEqual({
      matchLabels: { app: "flannel" },
    });
  });

  it("pins both images by version and installs the CNI plugin and config as upstream does", async () => {
    await build();

    const spec = daemonSetSpec();
    expect(spec.containers[0]!.image).toBe("docker.io/flannel/flannel:v0.26.7");
    expect(spec.initContainers).toEqual([
      {
        name: "install-cni-plugin",
        image: "docker.io/flannel/flannel-cni-plugin:v1.6.2-flannel1",
        command: ["cp"],
        args: ["-f", "/flannel", "/opt/cni/bin/flannel"],
        volumeMounts: [{ name: "cni-plugin", mountPath: "/opt/cni/bin" }],
      },
      {
        name: "install-cni",
        image: "docker.io/flannel/flannel:v0.26.7",
        command: ["cp"],
        args: ["-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"],
        volumeMounts: [
          { name: "cni", mountPath: "/etc/cni/net.d" },
          { name: "flannel-cfg", mountPath: "/etc/kube-flannel/" },
        ],
      },
    ]);
  });

  it("takes other versions, a mirror and extra node labels", async () => {
    await build({
      version: "v0.26.4",
      cniPluginVersion: "v1.6.0-flannel1",
      images: { repository: "registry.local/flannel", cniPluginRepository: "registry.local/cni" },
      nodeSelector: { "portable-lb.io/pool": "web" },
    });

    const spec = daemonSetSpec();
    expect(spec.containers[0]!.image).toBe("registry.local/flannel:v0.26.4");
    expect(spec.initContainers.map((c) => c.image)).toEqual([
      "registry.local/cni:v1.6.0-flannel1",
      "registry.local/flannel:v0.26.4",
    ]);
    expect(spec.nodeSelector).toEqual({ "kubernetes.io/os": "linux", "portable-lb.io/pool": "web" });
  });

  it("runs an environment's own flanneld image, and in the lab no CNI installers (containerd's template serves)", async () => {
    await build({ platform: "lab", image: "localhost/portable-lb/flannel:abc123", version: "v0.26.4" });
    const spec = daemonSetSpec();
    expect(spec.containers[0]!.image).toBe("localhost/portable-lb/flannel:abc123");
    expect(spec.initContainers).toEqual([]);
    expect(spec.volumes.map((v: { name: string }) => v.name)).not.toContain("cni");
  });

  it("leaves the CNI to the machines when told (installCni: false), on any platform; the lab can opt in", async () => {
    await build({ platform: "onprem", installCni: false });
    let spec = daemonSetSpec();
    expect(spec.initContainers).toEqual([]);
    expect(spec.volumes.map((v: { name: string }) => v.name)).toEqual(["run", "flannel-cfg", "xtables-lock"]);
    // flanneld itself still routes: its container and mounts are unchanged.
    expect(spec.containers[0]!.image).toBe("docker.io/flannel/flannel:v0.26.7");

    await build({ platform: "lab", installCni: true });
    spec = daemonSetSpec();
    expect(spec.initContainers.map((c) => c.name)).toEqual(["install-cni-plugin", "install-cni"]);
  });

  it("waits for the DaemonSet unless skipAwait is set", async () => {
    await build();
    expect(inputsOf("kubernetes:apps/v1:DaemonSet").metadata.annotations).toBeUndefined();

    await build({ skipAwait: true });
    expect(inputsOf("kubernetes:apps/v1:DaemonSet").metadata.annotations).toEqual({
      "pulumi.com/skipAwait": "true",
    });
  });

  it("refuses a backend the platform cannot run before registering anything", () => {
    recorded.length = 0;
    expect(
      () => new Flannel("bad", { platform: "gcp", podCidr: "10.244.0.0/16", backend: "host-gw" }),
    ).toThrow(ConfigError);
    expect(
      () => new Flannel("bad", { platform: "onprem", podCidr: "10.244.0.0/16", vxlan: { vni: 2 } }),
    ).toThrow(/^flannel\.vxlan: VNI and port apply only to the vxlan backend, not host-gw/);
    expect(recorded).toEqual([]);
  });
});
