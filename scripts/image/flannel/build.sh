#!/usr/bin/env bash
# The flannel image the lab's nodes run flannel's DaemonSet from: flanneld (built by the bootstrap
# from github.com/flannel-io/flannel on the Go module proxy, at FLANNEL_VERSION) at upstream's path
# /opt/bin/flanneld, on Debian's essential set plus debian-packages (iptables, which flanneld calls).
# No public registry is reachable here, so the lab cannot pull docker.io/flannel/flannel.
#
#   scripts/image/flannel/build.sh FLANNELD OUT.tar REF EPOCH LOG
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 5 ] || { echo "usage: $0 FLANNELD OUT.tar REF EPOCH LOG" >&2; exit 2; }
exec "$here/../debianImage.sh" "$1" /opt/bin/flanneld "$here/debian-packages" "${@:2}"
