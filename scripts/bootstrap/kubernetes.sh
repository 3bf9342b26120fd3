# Kubernetes built from k8s.io/kubernetes on the Go module proxy at KUBERNETES_VERSION: the control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler), the lab nodes' kubelet and
# kube-proxy, and the pause binary their sandbox image runs. Sourced by bootstrap.sh.

KUBERNETES_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# build_kubernetes STAGING: every command, then pause as upstream builds it (static, from the same
# module's C source).
build_kubernetes() {
  local staging=$1 version=$KUBERNETES_VERSION mod src cmd ldflags
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
  for cmd in "${KUBERNETES_COMMANDS[@]}"; do
    go_build "$cmd" "$staging/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd" -ldflags "$ldflags" || { cd / && rm -rf "$mod"; return 1; }
  done
  cd / && rm -rf "$mod"
  gcc -Os -Wall -Werror -static -DVERSION="v$version-portable-lb" \
    -o "$staging/bin/pause" "$src/build/pause/linux/pause.c" >>"$PLB_LOGS/pause.log" 2>&1 ||
    { tail -5 "$PLB_LOGS/pause.log" >&2; say "ERROR: gcc of pause failed; log: $PLB_LOGS/pause.log"; return 1; }
}

install_kubernetes() {
  install_tool kubernetes "$KUBERNETES_VERSION" build_kubernetes
}
