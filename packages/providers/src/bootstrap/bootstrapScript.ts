// The one node bootstrap every provisioning environment runs: a pure function from the node's plan
// and the cluster's credentials to a bash script that installs containerd and kubeadm at the pinned
// Kubernetes version and then inits the control plane or joins the cluster. onprem runs it over SSH;
// the clouds hand it to cloud-init (cloudInit.ts) or as a GCE startup script, unchanged.
import { DEFAULT_LB_NODE_SELECTOR, LB_POD_SYSCTLS } from "@portable-lb/core";
import type { NodeRole } from "../provider.ts";
import { metadataGuardLines } from "./metadataGuard.ts";

/** The nodes' Kubernetes, the lab's too (scripts/versions.env KUBERNETES_VERSION). */
export const KUBERNETES_VERSION = "1.35.4";
/** The revision of the Kubernetes package repository's kubeadm, kubelet and kubectl packages. */
export const KUBERNETES_PACKAGE_REVISION = "1.1";
export const API_SERVER_PORT = 6443;
/** How long a joining node waits for the control plane to answer (the clouds boot them together). */
export const JOIN_DISCOVERY_TIMEOUT = "15m0s";

/** How the kubelet learns its --provider-id, which the cloud-routes mode reads from the Node. */
export type ProviderIdSource =
  /** From the instance metadata service (IMDSv2) at boot: aws:///ZONE/INSTANCE-ID. */
  | { from: "aws-metadata" }
  /** Known beforehand (GCE: gce://PROJECT/ZONE/NAME). */
  | { from: "value"; value: string };

export interface BootstrapScriptInput {
  clusterName: string;
  node: { name: string; role: NodeRole; address: string };
  /** None on premises: no cloud instance to name. */
  providerId?: ProviderIdSource;
  /** The control plane's address on the node network; the API endpoint nodes join. */
  controlPlaneAddress: string;
  /** Further names and addresses the API server's certificate must hold (a public address). */
  apiServerCertSans: readonly string[];
  podCidr: string;
  serviceCidr: string;
  /** The bootstrap token (id.secret) joining nodes present, and the control plane creates. */
  joinToken: string;
  /** sha256:HEX of the cluster CA's public key (caCertHash.ts), which joining nodes pin. */
  caCertHash: string;
  /** The cluster CA, on the control plane only: kubeadm signs every certificate with it. */
  ca?: { certPem: string; keyPem: string };
  /** Taint LB nodes NoSchedule so only the LB pods and node agents (which tolerate it) run there. */
  lbTaint: boolean;
  /** What machines we did not make may need (on premises); the clouds' images need none of it. */
  machines?: MachineSettings;
}

export interface MachineSettings {
  /** A registry holding kubeadm's images under their usual names (an air-gapped site's mirror). */
  imageRepository?: string;
  /**
   * The machines boot with cgroup v1, which kubelet 1.35 refuses and kubeadm's SystemVerification
   * check fails: the kubelet is told to run anyway (failCgroupV1: false), and kubeadm to skip that
   * check, as kubeadm's own message says to.
   */
  cgroupV1?: boolean;
  /** A folder on every machine with kubeadm patches (site-specific kubelet or static pod settings). */
  kubeadmPatches?: string;
  /**
   * What kube-proxy must leave alone on these machines (kubeadm patches cannot reach its
   * configuration): machines in containers, or tuned by the site, keep their machine-wide conntrack
   * limits (0: leave as is), and a kube-proxy without CAP_SYS_RESOURCE its OOM score.
   */
  kubeProxy?: {
    conntrack?: {
      maxPerCore?: number;
      min?: number;
      tcpEstablishedTimeout?: string;
      tcpCloseWaitTimeout?: string;
    };
    oomScoreAdj?: number;
  };
}

const PATHS = {
  kubeadmConfig: "/etc/kubernetes/portable-lb-kubeadm.yaml",
  caCert: "/etc/kubernetes/pki/ca.crt",
  caKey: "/etc/kubernetes/pki/ca.key",
};

const LB_LABEL = Object.entries(DEFAULT_LB_NODE_SELECTOR)[0]!;

// Every value written into the script unquoted: names, addresses, prefixes, tokens. Anything else
// could change the script's meaning, so it is refused rather than escaped.
const SAFE = /^[A-Za-z0-9._:/=-]+$/;

function safe(field: string, value: string): string {
  if (!SAFE.test(value))
    throw new Error(`bootstrap script: ${field} ${JSON.stringify(value)} is not a plain value`);
  return value;
}

function pem(field: string, value: string): string {
  const text = value.trimEnd();
  if (!/^-----BEGIN [A-Z ]+-----\n[A-Za-z0-9+/=\n]+\n-----END [A-Z ]+-----$/.test(text))
    throw new Error(`bootstrap script: ${field} is not one PEM block`);
  return text;
}

/** kubeadm's kubeletExtraArgs (v1beta4: a list), the node's registration and its taints. */
function nodeRegistration(i: BootstrapScriptInput): string[] {
  const lb = i.node.role === "lb";
  const args: [string, string][] = [
    ["node-ip", safe("node.address", i.node.address)],
    ...(i.providerId ? [["provider-id", "${PROVIDER_ID}"] as [string, string]] : []),
    // The LB pods set these in their own network namespace; none is on the kubelet's safe list.
    ...(lb ? [["allowed-unsafe-sysctls", LB_POD_SYSCTLS.join(",")] as [string, string]] : []),
    ...(lb ? [["node-labels", `${LB_LABEL[0]}=${LB_LABEL[1]}`] as [string, string]] : []),
  ];
  return [
    "nodeRegistration:",
    `  name: ${safe("node.name", i.node.name)}`,
    "  criSocket: unix:///run/containerd/containerd.sock",
    "  kubeletExtraArgs:",
    ...args.flatMap(([name, value]) => [`    - name: ${name}`, `      value: "${value}"`]),
    ...(lb && i.lbTaint ? ["  taints:", `    - key: ${LB_LABEL[0]}`, "      effect: NoSchedule"] : []),
    ...(i.machines?.cgroupV1 ? ["  ignorePreflightErrors: [SystemVerification]"] : []),
  ];
}

/** kubeadm applies the machine's own patches to what it writes (both init and join read them). */
function patches(i: BootstrapScriptInput): string[] {
  const dir = i.machines?.kubeadmPatches;
  return dir ? ["patches:", `  directory: ${safe("kubeadmPatches", dir)}`] : [];
}

/** The kubeadm configuration: InitConfiguration and ClusterConfiguration, or a JoinConfiguration. */
function kubeadmConfig(i: BootstrapScriptInput): string[] {
  const endpoint = `${safe("controlPlaneAddress", i.controlPlaneAddress)}:${API_SERVER_PORT}`;
  const token = safe("joinToken", i.joinToken);
  if (i.node.role !== "control-plane")
    return [
      "apiVersion: kubeadm.k8s.io/v1beta4",
      "kind: JoinConfiguration",
      "discovery:",
      "  bootstrapToken:",
      `    apiServerEndpoint: ${endpoint}`,
      `    token: ${token}`,
      "    caCertHashes:",
      `      - ${safe("caCertHash", i.caCertHash)}`,
      "timeouts:",
      `  discovery: ${JOIN_DISCOVERY_TIMEOUT}`,
      ...nodeRegistration(i),
      ...patches(i),
    ];
  // Once each: on premises the public address is the control plane's own.
  const sans = [...new Set([i.controlPlaneAddress, ...i.apiServerCertSans])].map((s) =>
    safe("apiServerCertSans", s),
  );
  return [
    "apiVersion: kubeadm.k8s.io/v1beta4",
    "kind: InitConfiguration",
    "bootstrapTokens:",
    `  - token: ${token}`,
    // Never expires: machines added later (more workers, a replaced LB node) join with this same
    // token, which lives only in Pulumi's state (a secret), in root-only files on the machines and in
    // their boot scripts, which the metadata guard keeps from pods. kubeadm's 24 h default would let
    // every later join fail, in the clouds silently.
    "    ttl: 0s",
    "    usages: [signing, authentication]",
    "    groups: [system:bootstrappers:kubeadm:default-node-token]",
    "localAPIEndpoint:",
    `  advertiseAddress: ${i.controlPlaneAddress}`,
    `  bindPort: ${API_SERVER_PORT}`,
    ...nodeRegistration(i),
    ...patches(i),
    "---",
    "apiVersion: kubeadm.k8s.io/v1beta4",
    "kind: ClusterConfiguration",
    `clusterName: ${safe("clusterName", i.clusterName)}`,
    `kubernetesVersion: v${KUBERNETES_VERSION}`,
    `controlPlaneEndpoint: ${endpoint}`,
    ...(i.machines?.imageRepository
      ? [`imageRepository: ${safe("imageRepository", i.machines.imageRepository)}`]
      : []),
    "networking:",
    // Flannel's Network is the pod CIDR; kubeadm hands each node its slice (--allocate-node-cidrs).
    `  podSubnet: ${safe("podCidr", i.podCidr)}`,
    `  serviceSubnet: ${safe("serviceCidr", i.serviceCidr)}`,
    "apiServer:",
    "  certSANs:",
    ...sans.map((s) => `    - ${s}`),
    "---",
    "apiVersion: kubelet.config.k8s.io/v1beta1",
    "kind: KubeletConfiguration",
    "cgroupDriver: systemd",
    // In the cluster's kubelet-config, so every joining node's kubelet gets it too.
    ...(i.machines?.cgroupV1 ? ["failCgroupV1: false"] : []),
    ...kubeProxyConfig(i.machines?.kubeProxy),
  ];
}

/** kube-proxy's configuration (the cluster's kube-proxy ConfigMap), where the site says anything. */
function kubeProxyConfig(proxy: MachineSettings["kubeProxy"]): string[] {
  if (!proxy) return [];
  const conntrack = Object.entries(proxy.conntrack ?? {}).map(
    ([key, value]) => `  ${key}: ${safe(`kubeProxy.conntrack.${key}`, String(value))}`,
  );
  return [
    "---",
    "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
    "kind: KubeProxyConfiguration",
    ...(conntrack.length ? ["conntrack:", ...conntrack] : []),
    ...(proxy.oomScoreAdj !== undefined
      ? [`oomScoreAdj: ${safe("kubeProxy.oomScoreAdj", String(proxy.oomScoreAdj))}`]
      : []),
  ];
}

function providerIdLines(source: ProviderIdSource | undefined): string[] {
  if (!source) return [];
  if (source.from === "value")
    return [
      "# The cloud instance this node is: the cloud-routes mode finds it through the Node's providerID.",
      `PROVIDER_ID=${safe("providerId", source.value)}`,
    ];
  return [
    "# The EC2 instance this node is, from the metadata service (IMDSv2): the cloud-routes mode finds",
    "# it through the Node's providerID.",
    "imds_token=$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)",
    'imds() { curl -fsS -H "X-aws-ec2-metadata-token: ${imds_token}" "http://169.254.169.254/latest/meta-data/$1"; }',
    'PROVIDER_ID="aws:///$(imds placement/availability-zone)/$(imds instance-id)"',
  ];
}

function caLines(i: BootstrapScriptInput): string[] {
  if (i.node.role !== "control-plane") return [];
  if (!i.ca) throw new Error("bootstrap script: the control plane needs the cluster CA");
  return [
    "",
    "# The cluster CA, made by Pulumi (so the admin kubeconfig is known without logging in here):",
    "# kubeadm signs the cluster's certificates with it instead of making its own.",
    "install -d -m 0755 /etc/kubernetes/pki",
    `cat >${PATHS.caCert} <<'CA_CERT'`,
    pem("ca.certPem", i.ca.certPem),
    "CA_CERT",
    `install -m 0600 /dev/null ${PATHS.caKey}`,
    `cat >${PATHS.caKey} <<'CA_KEY'`,
    pem("ca.keyPem", i.ca.keyPem),
    "CA_KEY",
  ];
}

/** The script for one node. Safe to run again: a node that has joined stops at the first check. */
export function renderBootstrapScript(i: BootstrapScriptInput): string {
  const minor = KUBERNETES_VERSION.split(".").slice(0, 2).join(".");
  const pkg = `${KUBERNETES_VERSION}-${KUBERNETES_PACKAGE_REVISION}`;
  const repo = `https://pkgs.k8s.io/core:/stable:/v${minor}/deb/`;
  const init = i.node.role === "control-plane";
  const lines = [
    "#!/usr/bin/env bash",
    `# portable-lb node bootstrap: ${i.node.name} (${i.node.role}) of ${i.clusterName}, Kubernetes ${KUBERNETES_VERSION} with containerd.`,
    "# Rendered by @portable-lb/providers (bootstrap/bootstrapScript.ts); the same script runs over SSH",
    "# on premises and as cloud-init user data or a GCE startup script in the clouds.",
    "set -euo pipefail",
    "",
    "if [ -f /etc/kubernetes/kubelet.conf ]; then",
    `  echo "portable-lb: ${i.node.name} is already part of the cluster"`,
    "  exit 0",
    "fi",
    "export DEBIAN_FRONTEND=noninteractive",
    "",
    "# The kernel modules and settings kubeadm checks for and flannel needs.",
    "cat >/etc/modules-load.d/portable-lb.conf <<'MODULES'",
    "overlay",
    "br_netfilter",
    "MODULES",
    "# Already there (loaded, or built into the kernel): no modprobe, which fails on a kernel without",
    "# its modules folder.",
    "[ -d /sys/module/overlay ] || modprobe overlay",
    "[ -d /proc/sys/net/bridge ] || modprobe br_netfilter",
    "cat >/etc/sysctl.d/90-portable-lb.conf <<'SYSCTL'",
    "net.ipv4.ip_forward = 1",
    "net.bridge.bridge-nf-call-iptables = 1",
    "SYSCTL",
    "# Only these (--system would write every file's settings again, machine-wide).",
    "sysctl -p /etc/sysctl.d/90-portable-lb.conf >/dev/null",
    "swapoff -a",
    "sed -i '/\\sswap\\s/s/^/#/' /etc/fstab",
    "",
    `# A machine prepared beforehand, with containerd and with kubeadm, the kubelet and kubectl at`,
    `# ${KUBERNETES_VERSION}, is left as it is; any other gets them from the package repositories.`,
    "prepared() {",
    "  command -v containerd >/dev/null &&",
    `    [ "$(kubeadm version -o short 2>/dev/null)" = v${KUBERNETES_VERSION} ] &&`,
    `    [ "$(kubelet --version 2>/dev/null)" = "Kubernetes v${KUBERNETES_VERSION}" ] &&`,
    `    [ "$(kubectl version --client 2>/dev/null | head -n 1)" = "Client Version: v${KUBERNETES_VERSION}" ]`,
    "}",
    "if prepared; then",
    `  echo "portable-lb: ${i.node.name} has containerd and Kubernetes ${KUBERNETES_VERSION} already"`,
    "else",
    "  # containerd from the distribution, with the systemd cgroup driver the kubelet is set to.",
    "  apt-get update -q",
    "  apt-get install -y -q containerd apt-transport-https ca-certificates curl gpg",
    "  mkdir -p /etc/containerd",
    "  containerd config default | sed 's/SystemdCgroup = false/SystemdCgroup = true/' >/etc/containerd/config.toml",
    "  systemctl restart containerd",
    "",
    `  # kubeadm, the kubelet and kubectl at ${KUBERNETES_VERSION}, held there.`,
    "  install -d -m 0755 /etc/apt/keyrings",
    `  curl -fsSL ${repo}Release.key | gpg --dearmor --yes -o /etc/apt/keyrings/kubernetes.gpg`,
    `  echo 'deb [signed-by=/etc/apt/keyrings/kubernetes.gpg] ${repo} /' >/etc/apt/sources.list.d/kubernetes.list`,
    "  apt-get update -q",
    `  apt-get install -y -q kubelet=${pkg} kubeadm=${pkg} kubectl=${pkg}`,
    "  apt-mark hold kubelet kubeadm kubectl",
    "fi",
    ...(i.providerId ? ["", ...providerIdLines(i.providerId)] : []),
    // A cloud instance (it has a provider ID) has a metadata service.
    ...(i.providerId ? ["", ...metadataGuardLines()] : []),
    ...caLines(i),
    "",
    "# The bootstrap token is in it: readable by root only.",
    `install -m 0600 /dev/null ${PATHS.kubeadmConfig}`,
    // Unquoted: ${PROVIDER_ID} expands; every other value in it is a plain one (safe()).
    `cat >${PATHS.kubeadmConfig} <<KUBEADM`,
    ...kubeadmConfig(i),
    "KUBEADM",
    init ? `kubeadm init --config ${PATHS.kubeadmConfig}` : `kubeadm join --config ${PATHS.kubeadmConfig}`,
    `echo "portable-lb: ${i.node.name} ${init ? "runs the control plane" : "joined the cluster"}"`,
  ];
  return lines.join("\n") + "\n";
}
