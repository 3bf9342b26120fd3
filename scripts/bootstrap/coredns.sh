# CoreDNS at COREDNS_VERSION, the cluster DNS kubeadm (KUBERNETES_VERSION) deploys as its coredns
# addon, built from github.com/coredns/coredns on the Go module proxy as upstream's Makefile builds
# it: static, its main package at the module's root with every plugin of its plugin.cfg, the tag's
# commit as coremain.GitCommit. Only for the coredns image (scripts/image/control-plane). Sourced by
# bootstrap.sh.

build_coredns() {
  local staging=$1 version=$COREDNS_VERSION mod sha rc
  mod=$(mktemp -d) && cd "$mod" || return 1
  sha=$(GOFLAGS=-mod=mod go mod download -json "github.com/coredns/coredns@v$version" 2>>"$PLB_LOGS/go-download.log" |
    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{7\}\).*",$/\1/p')
  printf 'module portablelb.local/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns v%s\n' "$version" >go.mod
  mkdir -p "$staging/bin"
  CGO_ENABLED=0 go_build coredns "$staging/bin/coredns" github.com/coredns/coredns \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${sha:-unknown}"
  rc=$?
  cd / && rm -rf "$mod"
  [ $rc -eq 0 ] || return $rc
  "$staging/bin/coredns" -version | grep -qx "CoreDNS-$version" ||
    { say "ERROR: the coredns built does not say version $version"; return 1; }
}

install_coredns() { install_tool coredns "$COREDNS_VERSION" build_coredns; }
