# flanneld, the lab's overlay network, built from github.com/flannel-io/flannel on the Go module
# proxy (the same release core's Flannel component deploys). Sourced by bootstrap.sh.

build_flannel() {
  local staging=$1 mod
  mod=$(mktemp -d) && cd "$mod" || return 1
  cat >go.mod <<GOMOD
module portablelb.local/flannel

go 1.26

require github.com/flannel-io/flannel v$FLANNEL_VERSION
GOMOD
  mkdir -p "$staging/bin"
  # cgo on, as upstream builds amd64: the udp backend's package does not compile without it.
  # Upstream's command is named flannel; its images and docs call it flanneld.
  CGO_ENABLED=1 go_build flannel "$staging/bin/flanneld" github.com/flannel-io/flannel \
    -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=v$FLANNEL_VERSION"
  local rc=$?
  cd / && rm -rf "$mod"
  return $rc
}

install_flannel() { install_tool flannel "$FLANNEL_VERSION" build_flannel; }
