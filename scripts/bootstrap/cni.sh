# The CNI plugins the lab nodes' containerd wires pods with (bridge, host-local, loopback, portmap),
# built from github.com/containernetworking/plugins on the Go module proxy. Sourced by bootstrap.sh.

CNI_PLUGINS="main/bridge ipam/host-local main/loopback meta/portmap"

build_cni_plugins() {
  local staging=$1 mod plugin
  mod=$(mktemp -d) && cd "$mod" || return 1
  cat >go.mod <<GOMOD
module portablelb.local/cni-plugins

go 1.26

require github.com/containernetworking/plugins v$CNI_PLUGINS_VERSION
GOMOD
  mkdir -p "$staging/bin"
  for plugin in $CNI_PLUGINS; do
    # Static, as upstream releases them: containerd execs them in pod network namespaces.
    CGO_ENABLED=0 go_build "cni-${plugin#*/}" "$staging/bin/${plugin#*/}" \
      "github.com/containernetworking/plugins/plugins/$plugin" \
      -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$CNI_PLUGINS_VERSION" ||
      { cd / && rm -rf "$mod"; return 1; }
  done
  cd / && rm -rf "$mod"
}

install_cni_plugins() { install_tool cni-plugins "$CNI_PLUGINS_VERSION" build_cni_plugins; }
