# kube-apiserver, kube-controller-manager and kube-scheduler built from k8s.io/kubernetes on the
# Go module proxy. Sourced by bootstrap.sh.

KUBERNETES_COMMANDS="kube-apiserver kube-controller-manager kube-scheduler"

build_kubernetes() {
  local staging=$1 mod src cmd ldflags
  mod=$(mktemp -d) && cd "$mod" || return 1
  src=$(go_module_dir "k8s.io/kubernetes@v$KUBERNETES_VERSION")
  [ -n "$src" ] || { say "cannot download k8s.io/kubernetes v$KUBERNETES_VERSION"; return 1; }
  {
    printf 'module portablelb.local/kubernetes\n\ngo 1.26\n\ngodebug default=go1.26\n\n'
    printf 'require k8s.io/kubernetes v%s\n\n' "$KUBERNETES_VERSION"
    # kubernetes replaces its staging modules with local folders; here they come from the proxy.
    awk -v v="v0.${KUBERNETES_VERSION#1.}" '/^replace \(/ {inblock=1; next} inblock && /^\)/ {inblock=0; next}
         inblock && /=>/ {print "replace " $1 " => " $1 " " v}' "$src/go.mod"
  } >go.mod
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=${KUBERNETES_VERSION%%.*}"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  mkdir -p "$staging/bin"
  for cmd in $KUBERNETES_COMMANDS; do
    go_build "$cmd" "$staging/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd" -ldflags "$ldflags" || { cd / && rm -rf "$mod"; return 1; }
  done
  cd / && rm -rf "$mod"
}

install_kubernetes() { install_tool kubernetes "$KUBERNETES_VERSION" build_kubernetes; }
