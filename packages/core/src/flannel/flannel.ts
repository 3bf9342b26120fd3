// Flannel, the cluster's overlay network: one flanneld per node (kube-subnet-mgr mode) hands each
// node a slice of the pod CIDR and routes between them. Mirrors upstream kube-flannel.yml v0.26.x,
// except that the backend is chosen per platform and the objects carry portable-lb's labels.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { standardLabels } from "../labels.ts";
import type { Platform } from "../platform.ts";
import { SystemNamespace } from "../systemNamespace.ts";
import type { FlannelBackend, VxlanOptions } from "./flannelBackend.ts";
import { CONFIG_HASH_ANNOTATION, configHash } from "../configHash.ts";
import { flannelBackendConf, netConf, resolveFlannelBackend } from "./flannelBackend.ts";

export const FLANNEL_VERSION = "v0.26.7";
/** The flannel CNI plugin release that upstream ships with FLANNEL_VERSION. */
export const FLANNEL_CNI_PLUGIN_VERSION = "v1.6.2-flannel1";

export interface FlannelImages {
  /** Where flanneld's image comes from (a mirror, air-gapped); the tag is always `version`. */
  repository?: string;
  /** Where the CNI plugin's image comes from; the tag is always `cniPluginVersion`. */
  cniPluginRepository?: string;
}

export interface FlannelArgs {
  /** Decides the default backend and which backends are refused (see resolveFlannelBackend). */
  platform: Platform;
  /** The cluster's pod CIDR (the controller manager's --cluster-cidr); flannel's `Network`. */
  podCidr: pulumi.Input<string>;
  /** "host-gw", "vxlan" or "wireguard"; default by platform (host-gw on onprem/lab, vxlan on aws/gcp). */
  backend?: string;
  /** VNI and UDP port, for the vxlan backend only. */
  vxlan?: VxlanOptions;
  /** flanneld's image tag; default FLANNEL_VERSION. */
  version?: string;
  /**
   * flanneld's whole image reference, when the environment provides its own build (the lab: no public
   * registry is reachable there); overrides `images.repository` and `version`.
   */
  image?: string;
  /** The CNI plugin's image tag; default FLANNEL_CNI_PLUGIN_VERSION. */
  cniPluginVersion?: string;
  /** Default "kube-flannel", upstream's, so flannel's docs and tools find it. */
  namespace?: string;
  images?: FlannelImages;
  /**
   * Whether flannel installs its CNI plugin and configuration on each node (upstream's init
   * containers). False: the machines bring their own CNI configuration that hands pods addresses from
   * their node's pod CIDR (bridge and host-local, as flannel's plugin delegates; e.g. containerd's
   * `conf_template`), and flannel only routes between nodes. Default: true, except in the lab.
   */
  installCni?: boolean;
  /** Extra node labels the DaemonSet must match (kubernetes.io/os=linux always applies). */
  nodeSelector?: Record<string, string>;
  /**
   * Don't wait for the DaemonSet's pods to become ready (the `pulumi.com/skipAwait` annotation).
   * Default false: a real cluster should fail the update when flannel does not come up. Tests set it
   * because they run against an apiserver with no kubelets, where the pods never start.
   */
  skipAwait?: boolean;
}

const CNI_CONF_FILE = "10-flannel.conflist";

// Upstream's CNI conflist: flannel delegates to the bridge plugin; portmap serves hostPort.
const CNI_CONF = {
  name: "cbr0",
  cniVersion: "0.3.1",
  plugins: [
    { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true } },
    { type: "portmap", capabilities: { portMappings: true } },
  ],
};

function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}

/** Copies `from` to `to` in an init container, as upstream installs the CNI binary and config on the host. */
function installer(
  name: string,
  image: string,
  from: string,
  to: string,
  volumeMounts: k8s.types.input.core.v1.VolumeMount[],
): k8s.types.input.core.v1.Container {
  return { name, image, command: ["cp"], args: ["-f", from, to], volumeMounts };
}

export class Flannel extends pulumi.ComponentResource {
  /** The backend flanneld runs, after platform defaults and checks. */
  public readonly backend: FlannelBackend;
  /** The namespace flannel's pods run in. */
  public readonly namespace: pulumi.Output<string>;
  public readonly systemNamespace: SystemNamespace;
  public readonly serviceAccount: k8s.core.v1.ServiceAccount;
  public readonly clusterRole: k8s.rbac.v1.ClusterRole;
  public readonly clusterRoleBinding: k8s.rbac.v1.ClusterRoleBinding;
  public readonly configMap: k8s.core.v1.ConfigMap;
  public readonly daemonSet: k8s.apps.v1.DaemonSet;

  constructor(name: string, args: FlannelArgs, opts?: pulumi.ComponentResourceOptions) {
    // Checked before anything registers (and not inside the podCidr apply), so a bad value fails the
    // preview up front with its ConfigError and leaves no half-built component behind.
    const backend = resolveFlannelBackend(args.platform, args.backend);
    flannelBackendConf(backend, args.vxlan);
    super("portable-lb:core:Flannel", name, {}, opts);
    this.backend = backend;

    const version = args.version ?? FLANNEL_VERSION;
    const cniPluginVersion = args.cniPluginVersion ?? FLANNEL_CNI_PLUGIN_VERSION;
    const image = args.image ?? `${args.images?.repository ?? "docker.io/flannel/flannel"}:${version}`;
    const cniPluginImage = `${args.images?.cniPluginRepository ?? "docker.io/flannel/flannel-cni-plugin"}:${cniPluginVersion}`;
    const labels = standardLabels("flannel", { app: "flannel", tier: "node" });
    const installCni = args.installCni ?? args.platform !== "lab";
    const child = { parent: this };

    // flanneld needs hostNetwork and NET_ADMIN, which only the "privileged" Pod Security level allows.
    this.systemNamespace = new SystemNamespace(
      `${name}-ns`,
      { name: args.namespace ?? "kube-flannel", component: "flannel", podSecurity: "privileged" },
      child,
    );
    this.namespace = this.systemNamespace.name;
    const namespace = this.namespace;

    this.serviceAccount = new k8s.core.v1.ServiceAccount(
      `${name}-sa`,
      { metadata: { name: "flannel", namespace, labels } },
      child,
    );
    // Exactly upstream kube-flannel.yml v0.26.x, all kube-subnet-mgr calls: get its own pod (to learn
    // its node), get/list/watch nodes (each node's spec.podCIDR is its subnet; peers' annotations carry
    // their tunnel endpoints), and patch nodes/status, through which it writes its own node's
    // annotations and clears NetworkUnavailable. It never updates or deletes a node.
    this.clusterRole = new k8s.rbac.v1.ClusterRole(
      `${name}-role`,
      {
        metadata: { name: "flannel", labels },
        rules: [
          { apiGroups: [""], resources: ["pods"], verbs: ["get"] },
          { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "watch"] },
          { apiGroups: [""], resources: ["nodes/status"], verbs: ["patch"] },
        ],
      },
      child,
    );
    this.clusterRoleBinding = new k8s.rbac.v1.ClusterRoleBinding(
      `${name}-binding`,
      {
        metadata: { name: "flannel", labels },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: this.clusterRole.metadata.name,
        },
        subjects: [{ kind: "ServiceAccount", name: this.serviceAccount.metadata.name, namespace }],
      },
      child,
    );

    const netConfJson = pulumi
      .output(args.podCidr)
      .apply((podCidr) => json(netConf(podCidr, backend, args.vxlan)));
    this.configMap = new k8s.core.v1.ConfigMap(
      `${name}-cfg`,
      {
        metadata: { name: "kube-flannel-cfg", namespace, labels },
        data: { "cni-conf.json": json(CNI_CONF), "net-conf.json": netConfJson },
      },
      child,
    );

    const configDir = "/etc/kube-flannel/";
    const mounts = {
      run: { name: "run", mountPath: "/run/flannel" },
      cniPlugin: { name: "cni-plugin", mountPath: "/opt/cni/bin" },
      cni: { name: "cni", mountPath: "/etc/cni/net.d" },
      cfg: { name: "flannel-cfg", mountPath: configDir },
      // Shares the host's iptables lock so flanneld's masquerade rules don't race kube-proxy's.
      xtablesLock: { name: "xtables-lock", mountPath: "/run/xtables.lock" },
    };
    this.daemonSet = new k8s.apps.v1.DaemonSet(
      `${name}-ds`,
      {
        metadata: {
          name: "kube-flannel-ds",
          namespace,
          labels,
          ...(args.skipAwait && { annotations: { "pulumi.com/skipAwait": "true" } }),
        },
        spec: {
          selector: { matchLabels: { app: "flannel" } },
          template: {
            metadata: {
              labels,
              annotations: {
                [CONFIG_HASH_ANNOTATION]: netConfJson.apply((n) => configHash(json(CNI_CONF), n)),
              },
            },
            spec: {
              hostNetwork: true,
              // Nothing else on a node gets a pod IP until flannel runs: never evict it for other pods.
              priorityClassName: "system-node-critical",
              // Every node needs the overlay, including tainted control-plane and not-ready ones.
              tolerations: [{ operator: "Exists", effect: "NoSchedule" }],
              nodeSelector: { "kubernetes.io/os": "linux", ...args.nodeSelector },
              serviceAccountName: this.serviceAccount.metadata.name,
              // Without them the nodes' own CNI configuration gives pods their addresses (installCni). The
              // lab's nodes do so with containerd's template: flannel's CNI plugin is not on the Go
              // module proxy, so the lab cannot build its image.
              initContainers: !installCni
                ? []
                : [
                    installer("install-cni-plugin", cniPluginImage, "/flannel", "/opt/cni/bin/flannel", [
                      mounts.cniPlugin,
                    ]),
                    installer(
                      "install-cni",
                      image,
                      `${configDir}cni-conf.json`,
                      `/etc/cni/net.d/${CNI_CONF_FILE}`,
                      [mounts.cni, mounts.cfg],
                    ),
                  ],
              containers: [
                {
                  name: "kube-flannel",
                  image,
                  command: ["/opt/bin/flanneld"],
                  args: ["--ip-masq", "--kube-subnet-mgr"],
                  resources: { requests: { cpu: "100m", memory: "50Mi" } },
                  // Routes, links and iptables need NET_ADMIN (NET_RAW for raw sockets); nothing more.
                  securityContext: { privileged: false, capabilities: { add: ["NET_ADMIN", "NET_RAW"] } },
                  env: [
                    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                    { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                    // Upstream's value: room for node events on large clusters.
                    { name: "EVENT_QUEUE_DEPTH", value: "5000" },
                  ],
                  volumeMounts: [mounts.run, mounts.cfg, mounts.xtablesLock],
                },
              ],
              volumes: [
                { name: "run", hostPath: { path: "/run/flannel" } },
                ...(!installCni
                  ? []
                  : [
                      { name: "cni-plugin", hostPath: { path: "/opt/cni/bin" } },
                      { name: "cni", hostPath: { path: "/etc/cni/net.d" } },
                    ]),
                { name: "flannel-cfg", configMap: { name: this.configMap.metadata.name } },
                { name: "xtables-lock", hostPath: { path: "/run/xtables.lock", type: "FileOrCreate" } },
              ],
            },
          },
        },
      },
      child,
    );

    this.registerOutputs({ backend: this.backend, namespace: this.namespace });
  }
}
