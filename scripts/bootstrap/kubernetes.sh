# Kubernetes built from k8s.io/kubernetes on the Go module proxy: the control plane (kube-apiserver,
# kube-controller-manager, kube-scheduler) at KUBERNETES_VERSION, and the lab nodes' kubelet and
# kube-proxy (with the pause binary their sandbox image runs) at KUBERNETES_NODE_VERSION. Sourced by
# bootstrap.sh.

# build_kubernetes STAGING VERSION COMMAND...: the commands of k8s.io/kubernetes at VERSION.
build_kubernetes() {
  local staging=$1 version=$2 mod src cmd ldflags
  shift 2
  mod=$(mktemp -d) && cd "$mod" || return 1
  src=$(go_module_dir "k8s.io/kubernetes@v$version")
  [ -n "$src" ] || { say "cannot download k8s.io/kubernetes v$version"; return 1; }
  {
    printf 'module portablelb.local/kubernetes\n\ngo 1.26\n\ngodebug default=go1.26\n\n'
    printf 'require k8s.io/kubernetes v%s\n\n' "$version"
    # kubernetes replaces its staging modules with local folders; here they come from the proxy.
    awk -v v="v0.${version#1.}" '/^replace \(/ {inblock=1; next} inblock && /^\)/ {inblock=0; next}
         inblock && /=>/ {print "replace " $1 " => " $1 " " v}' "$src/go.mod"
  } >go.mod
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=${version%%.*}"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
  mkdir -p "$staging/bin"
  for cmd in "$@"; do
    go_build "$cmd" "$staging/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd" -ldflags "$ldflags" || { cd / && rm -rf "$mod"; return 1; }
  done
  cd / && rm -rf "$mod"
}

build_kubernetes_control_plane() {
  build_kubernetes "$1" "$KUBERNETES_VERSION" kube-apiserver kube-controller-manager kube-scheduler
}

# The node binaries, and pause as upstream builds it (static, from the same module's C source): the
# process every pod sandbox runs.
build_kubernetes_node() {
  local staging=$1 src
  build_kubernetes "$staging" "$KUBERNETES_NODE_VERSION" kubelet kube-proxy || return 1
  src=$(go_module_dir "k8s.io/kubernetes@v$KUBERNETES_NODE_VERSION")
  gcc -Os -Wall -Werror -static -DVERSION="v$KUBERNETES_NODE_VERSION-portable-lb" \
    -o "$staging/bin/pause" "$src/build/pause/linux/pause.c" >>"$PLB_LOGS/pause.log" 2>&1 ||
    { tail -5 "$PLB_LOGS/pause.log" >&2; say "ERROR: gcc of pause failed; log: $PLB_LOGS/pause.log"; return 1; }
}

install_kubernetes() {
  install_tool kubernetes "$KUBERNETES_VERSION" build_kubernetes_control_plane
  install_tool kubernetes-node "$KUBERNETES_NODE_VERSION" build_kubernetes_node
}
