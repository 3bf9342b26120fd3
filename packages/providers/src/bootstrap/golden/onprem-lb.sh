#!/usr/bin/env bash
# portable-lb node bootstrap: lb-1 (lb) of plb, Kubernetes 1.35.4 with containerd.
# Rendered by @portable-lb/providers (bootstrap/bootstrapScript.ts); the same script runs over SSH
# on premises and as cloud-init user data or a GCE startup script in the clouds.
set -euo pipefail

if [ -f /etc/kubernetes/kubelet.conf ]; then
  echo "portable-lb: lb-1 is already part of the cluster"
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
  echo "portable-lb: lb-1 has containerd and Kubernetes 1.35.4 already"
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

# The bootstrap token is in it: readable by root only.
install -m 0600 /dev/null /etc/kubernetes/portable-lb-kubeadm.yaml
cat >/etc/kubernetes/portable-lb-kubeadm.yaml <<KUBEADM
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.10:6443
    token: abc123.0123456789abcdef
    caCertHashes:
      - sha256:abbffdef64e5adad9754e158f63dd035d13ffc5a2d79199b95f4246750603da8
timeouts:
  discovery: 15m0s
nodeRegistration:
  name: lb-1
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
    - name: node-ip
      value: "10.0.0.11"
    - name: allowed-unsafe-sysctls
      value: "net.ipv4.ip_forward,net.ipv4.vs.conntrack,net.ipv4.vs.expire_nodest_conn"
    - name: node-labels
      value: "portable-lb.io/load-balancer=true"
KUBEADM
kubeadm join --config /etc/kubernetes/portable-lb-kubeadm.yaml
echo "portable-lb: lb-1 joined the cluster"
