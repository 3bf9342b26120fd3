# etcd at ETCD_VERSION, the one kubeadm (KUBERNETES_VERSION) runs as its control plane's local etcd,
# built from go.etcd.io/etcd/server/v3 on the Go module proxy as upstream's scripts/build_lib.sh
# builds it: static, its main package in the server module, the tag's commit as version.GitSHA.
# Only for the control-plane etcd image (scripts/image/control-plane); kept off PATH, where the test
# harness's control plane finds Debian's etcd. Sourced by bootstrap.sh.

build_etcd() {
  local staging=$1 version=$ETCD_VERSION mod sha rc
  mod=$(mktemp -d) && cd "$mod" || return 1
  # The release's commit, as `git rev-parse --short HEAD` gives it in upstream's build; the proxy
  # records it in the root module's origin (upstream's fallback when it has none: GitNotFound).
  sha=$(GOFLAGS=-mod=mod go mod download -json "go.etcd.io/etcd/v3@v$version" 2>>"$PLB_LOGS/go-download.log" |
    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{7\}\).*",$/\1/p')
  # go 1.24 as the server module says, so the runtime's GODEBUG defaults are the ones upstream ships.
  cat >go.mod <<GOMOD
module portablelb.local/etcd

go 1.24

require go.etcd.io/etcd/server/v3 v$version
GOMOD
  mkdir -p "$staging/bin"
  CGO_ENABLED=0 go_build etcd "$staging/bin/etcd" go.etcd.io/etcd/server/v3 \
    -installsuffix=cgo -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${sha:-GitNotFound}"
  rc=$?
  cd / && rm -rf "$mod"
  [ $rc -eq 0 ] || return $rc
  # Read whole before matching (coredns.sh says why).
  grep -qx "etcd Version: $version" <<<"$("$staging/bin/etcd" --version)" ||
    { say "ERROR: the etcd built does not say version $version"; return 1; }
}

install_etcd() { install_tool etcd "$ETCD_VERSION" build_etcd; }
