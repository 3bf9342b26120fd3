# CoreDNS at COREDNS_VERSION, the cluster DNS kubeadm (KUBERNETES_VERSION) deploys as its coredns
# addon, built from github.com/coredns/coredns on the Go module proxy as upstream's Makefile builds
# it (static, the tag's commit as coremain.GitCommit), but as a custom build in the way its README
# describes: a main package with the plugins of the release's own list (core/plugin/zplugin.go) less
# those that only serve other clouds' and tools' APIs (COREDNS_LEFT_OUT, in common.sh). Those pull
# in the AWS, Azure, Google, Nomad, etcd and tracing SDKs: without them a cold build took 90 s, not
# 119 s. kubeadm's Corefile's plugins (checked) and the others a lab user would add to it stay. Only
# for the coredns image (scripts/image/control-plane). Sourced by bootstrap.sh.

# What kubeadm's default Corefile uses (prometheus is the metrics plugin's directive).
COREDNS_KUBEADM_PLUGINS="errors health ready kubernetes prometheus forward cache loop reload loadbalance"

build_coredns() {
  local staging=$1 version=$COREDNS_VERSION mod src sha rc
  mod=$(mktemp -d) && cd "$mod" || return 1
  sha=$(GOFLAGS=-mod=mod go mod download -json "github.com/coredns/coredns@v$version" 2>>"$PLB_LOGS/go-download.log" |
    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{7\}\).*",$/\1/p')
  printf 'module portablelb.local/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns v%s\n' "$version" >go.mod
  src=$(go_module_dir "github.com/coredns/coredns@v$version")
  [ -n "$src" ] || { say "cannot download github.com/coredns/coredns v$version"; return 1; }
  {
    printf 'package main\n\nimport (\n'
    grep -E '^\s*_ "' "$src/core/plugin/zplugin.go" |
      grep -vE "/plugin/($(echo "$COREDNS_LEFT_OUT" | tr ' ' '|'))\"\$"
    printf '\t"github.com/coredns/coredns/coremain"\n)\n\nfunc main() { coremain.Run() }\n'
  } >main.go
  mkdir -p "$staging/bin"
  CGO_ENABLED=0 go_build coredns "$staging/bin/coredns" . \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${sha:-unknown}"
  rc=$?
  cd / && rm -rf "$mod"
  [ $rc -eq 0 ] || return $rc
  # Read whole before matching: `grep -q` stops at the first line, and under pipefail the SIGPIPE
  # that gives a binary still printing its next line failed the build now and then.
  grep -qx "CoreDNS-$version" <<<"$("$staging/bin/coredns" -version)" ||
    { say "ERROR: the coredns built does not say version $version"; return 1; }
  local plugins p
  plugins=$("$staging/bin/coredns" -plugins)
  for p in $COREDNS_KUBEADM_PLUGINS; do
    grep -qx "$p" <<<"$plugins" || { say "ERROR: the coredns built has no $p plugin, which kubeadm's Corefile uses"; return 1; }
  done
}

install_coredns() { install_tool coredns "$COREDNS_TOOL_VERSION" build_coredns; }
