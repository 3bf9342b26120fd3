#!/usr/bin/env bash
# portable-lb node bootstrap: plb-cp (control-plane) of plb, Kubernetes 1.35.4 with containerd.
# Rendered by @portable-lb/providers (bootstrap/bootstrapScript.ts); the same script runs over SSH
# on premises and as cloud-init user data or a GCE startup script in the clouds.
set -euo pipefail

if [ -f /etc/kubernetes/kubelet.conf ]; then
  echo "portable-lb: plb-cp is already part of the cluster"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive

# The kernel modules and settings kubeadm checks for and flannel needs.
cat >/etc/modules-load.d/portable-lb.conf <<'MODULES'
overlay
br_netfilter
MODULES
# Already there (loaded, or built into the kernel): no modprobe, which fails on a kernel without
# its modules folder.
[ -d /sys/module/overlay ] || modprobe overlay
[ -d /proc/sys/net/bridge ] || modprobe br_netfilter
cat >/etc/sysctl.d/90-portable-lb.conf <<'SYSCTL'
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
SYSCTL
# Only these (--system would write every file's settings again, machine-wide).
sysctl -p /etc/sysctl.d/90-portable-lb.conf >/dev/null
swapoff -a
sed -i '/\sswap\s/s/^/#/' /etc/fstab

# A machine prepared beforehand, with containerd and with kubeadm, the kubelet and kubectl at
# 1.35.4, is left as it is; any other gets them from the package repositories.
prepared() {
  command -v containerd >/dev/null &&
    [ "$(kubeadm version -o short 2>/dev/null)" = v1.35.4 ] &&
    [ "$(kubelet --version 2>/dev/null)" = "Kubernetes v1.35.4" ] &&
    [ "$(kubectl version --client 2>/dev/null | head -n 1)" = "Client Version: v1.35.4" ]
}
if prepared; then
  echo "portable-lb: plb-cp has containerd and Kubernetes 1.35.4 already"
else
  # containerd from the distribution, with the systemd cgroup driver the kubelet is set to.
  apt-get update -q
  apt-get install -y -q containerd apt-transport-https ca-certificates curl gpg
  mkdir -p /etc/containerd
  containerd config default | sed 's/SystemdCgroup = false/SystemdCgroup = true/' >/etc/containerd/config.toml
  systemctl restart containerd

  # kubeadm, the kubelet and kubectl at 1.35.4, held there.
  install -d -m 0755 /etc/apt/keyrings
  curl -fsSL https://pkgs.k8s.io/core:/stable:/v1.35/deb/Release.key | gpg --dearmor --yes -o /etc/apt/keyrings/kubernetes.gpg
  echo 'deb [signed-by=/etc/apt/keyrings/kubernetes.gpg] https://pkgs.k8s.io/core:/stable:/v1.35/deb/ /' >/etc/apt/sources.list.d/kubernetes.list
  apt-get update -q
  apt-get install -y -q kubelet=1.35.4-1.1 kubeadm=1.35.4-1.1 kubectl=1.35.4-1.1
  apt-mark hold kubelet kubeadm kubectl
fi

# The EC2 instance this node is, from the metadata service (IMDSv2): the cloud-routes mode finds
# it through the Node's providerID.
imds_token=$(curl -fsS -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)
imds() { curl -fsS -H "X-aws-ec2-metadata-token: ${imds_token}" "http://169.254.169.254/latest/meta-data/$1"; }
PROVIDER_ID="aws:///$(imds placement/availability-zone)/$(imds instance-id)"

# Pods may not read the instance metadata: it serves this script (the join token, and on the
# control plane the CA key) and the machine's cloud credentials; only LB pods that need their
# credentials (cloud-routes mode) are let through, by the node agent. Loaded at every boot before
# the kubelet, which does not start without it.
command -v nft >/dev/null || apt-get install -y -q nftables
install -d -m 0755 /etc/portable-lb
cat >/etc/portable-lb/metadata-guard.nft <<'NFT'
table inet portable_lb_metadata_guard
delete table inet portable_lb_metadata_guard
table inet portable_lb_metadata_guard {
  set lb_pods { type ipv4_addr; }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    ip daddr 169.254.169.254 ip saddr @lb_pods accept
    ip daddr 169.254.169.254 udp dport 53 accept
    ip daddr 169.254.169.254 tcp dport 53 accept
    ip daddr 169.254.169.254 counter drop
  }
}
NFT
cat >/etc/systemd/system/portable-lb-metadata-guard.service <<'UNIT'
[Unit]
Description=portable-lb: keep pods from the instance metadata service
Before=kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/nft -f /etc/portable-lb/metadata-guard.nft
[Install]
WantedBy=multi-user.target
RequiredBy=kubelet.service
UNIT
systemctl daemon-reload
systemctl enable --now portable-lb-metadata-guard.service

# The cluster CA, made by Pulumi (so the admin kubeconfig is known without logging in here):
# kubeadm signs the cluster's certificates with it instead of making its own.
install -d -m 0755 /etc/kubernetes/pki
cat >/etc/kubernetes/pki/ca.crt <<'CA_CERT'
-----BEGIN CERTIFICATE-----
MIIBgjCCASegAwIBAgIUCt2MF83jBxyKcXs/pAsxnw5OIFAwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKa3ViZXJuZXRlczAgFw0yNjExMjQyMzM4MDBaGA8yMTI2MTAz
MTIzMzgwMFowFTETMBEGA1UEAwwKa3ViZXJuZXRlczBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABEaqYW+wFps4MyYzKz7A+DYQ4btomAp3hgLcb+MHtlYiBAKWt9xr
susKyXECXKsUzwH3eJEtxwtfqIoI6sZrXCqjUzBRMB0GA1UdDgQWBBTVAm6foxWx
2p6RDDTUMjAwye5/0zAfBgNVHSMEGDAWgBTVAm6foxWx2p6RDDTUMjAwye5/0zAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQDj9FINJ2tyUg6B67GO
AcTbHdjXq+Dpw6YWBxXgq/Ql+gIhAOKG+vDxNRJ8wPrfZWE0VGEN4hUBE+pJj8Cs
l4ZgEeTu
-----END CERTIFICATE-----
CA_CERT
install -m 0600 /dev/null /etc/kubernetes/pki/ca.key
cat >/etc/kubernetes/pki/ca.key <<'CA_KEY'
-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIIH9JH8ENMpl5i9qqbUHHZwbjvXf2juWAuQqOBlcFQ0soAoGCCqGSM49
AwEHoUQDQgAERqphb7AWmzgzJjMrPsD4NhDhu2iYCneGAtxv4we2ViIEApa33Guy
6wrJcQJcqxTPAfd4kS3HC1+oigjqxmtcKg==
-----END EC PRIVATE KEY-----
CA_KEY

# The bootstrap token is in it: readable by root only.
install -m 0600 /dev/null /etc/kubernetes/portable-lb-kubeadm.yaml
cat >/etc/kubernetes/portable-lb-kubeadm.yaml <<KUBEADM
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
  - token: abc123.0123456789abcdef
    ttl: 0s
    usages: [signing, authentication]
    groups: [system:bootstrappers:kubeadm:default-node-token]
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
  bindPort: 6443
nodeRegistration:
  name: plb-cp
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
    - name: node-ip
      value: "10.0.0.10"
    - name: provider-id
      value: "${PROVIDER_ID}"
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: plb
kubernetesVersion: v1.35.4
controlPlaneEndpoint: 10.0.0.10:6443
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
apiServer:
  certSANs:
    - 10.0.0.10
    - 203.0.113.7
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
KUBEADM
kubeadm init --config /etc/kubernetes/portable-lb-kubeadm.yaml
echo "portable-lb: plb-cp runs the control plane"
