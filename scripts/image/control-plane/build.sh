#!/usr/bin/env bash
# A kubeadm control-plane image (kube-apiserver, kube-controller-manager, kube-scheduler, etcd) in
# the shape of upstream's distroless base: the command at /usr/local/bin/NAME, on PATH as kubeadm's
# static pod manifests name it (`command: [kube-apiserver, ...]`), with what a Go server needs beside
# it: the loader and libraries the binary links against (the bootstrap's Kubernetes commands are
# built with cgo, against this machine's glibc; a static etcd needs none), copied as the real files
# at the paths the binary asks for, Debian's CA bundle (Go's system roots: webhooks, OIDC), the
# users of distroless (root, nobody, nonroot), nsswitch.conf and /tmp. Nothing else: no shell, no
# package manager, a few MB beside the binary where a Debian rootfs would add ~80 MB.
# kube-apiserver gets cap_net_bind_service as a file capability, as upstream's image does, so a
# non-root API server may still listen on a port below 1024. coredns is shaped as upstream's image:
# the command at /coredns, run as nonroot (65532), with that capability too (it serves port 53).
#
#   scripts/image/control-plane/build.sh NAME BINARY OUT.tar REF EPOCH
# NAME: kube-apiserver, kube-controller-manager, kube-scheduler, etcd or coredns
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 5 ] || { echo "usage: $0 NAME BINARY OUT.tar REF EPOCH" >&2; exit 2; }
name=$1 binary=$2 out=$3 ref=$4 epoch=$5
case $name in
coredns) "$binary" -version >/dev/null; path=/coredns user=(--user 65532:65532) ;;
*) "$binary" --version >/dev/null; path=/usr/local/bin/$name user=() ;;
esac
rootfs=$(mktemp -d "${TMPDIR:-/tmp}/$name-rootfs.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
chmod 755 "$rootfs"
install -d -m 755 "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs"
install -d -m 1777 "$rootfs/tmp"
install -m 755 "$binary" "$rootfs$path"
install -m 644 "$here/etc/passwd" "$here/etc/group" "$here/etc/nsswitch.conf" "$rootfs/etc/"
install -m 644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
# ldd: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader as "/lib64/ld-linux-x86-64.so.2
# (0x...)"; a static binary has neither (ldd then says so and fails).
if ldd "$binary" >"$rootfs/ldd" 2>&1; then
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' "$rootfs/ldd" | while read -r lib; do
    install -D -m 755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
fi
rm "$rootfs/ldd"
case $name in kube-apiserver | coredns) setcap cap_net_bind_service=+ep "$rootfs$path" ;; esac
"$here/../ociImage.sh" --rootfs "$rootfs" --out "$out" --ref "$ref" --timestamp "$epoch" \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --entrypoint "[\"$path\"]" "${user[@]}"
