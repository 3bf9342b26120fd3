#!/usr/bin/env bash
# The kube-proxy image kubeadm's DaemonSet runs (`command: [/usr/local/bin/kube-proxy, ...]`): the
# bootstrap's kube-proxy at KUBERNETES_VERSION at upstream's path, on Debian's essential set plus
# debian-packages (the netfilter tools each proxy mode execs), as upstream's distroless-iptables
# base carries them.
#
#   scripts/image/kube-proxy/build.sh KUBE_PROXY OUT.tar REF EPOCH LOG
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 5 ] || { echo "usage: $0 KUBE_PROXY OUT.tar REF EPOCH LOG" >&2; exit 2; }
exec "$here/../debianImage.sh" "$1" /usr/local/bin/kube-proxy "$here/debian-packages" "${@:2}"
