# Kubernetes built from k8s.io/kubernetes on the Go module proxy at KUBERNETES_VERSION: the control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler), the lab nodes' kubelet and
# kube-proxy, the pause binary their sandbox image runs, kubectl and kubeadm. Sourced by bootstrap.sh.

# kubernetes_module NAME: a go.mod in the current folder for a wrapper module NAME that requires
# k8s.io/kubernetes at KUBERNETES_VERSION (scripts/conformance/build.sh builds in one too)
kubernetes_module() {
  local version=$KUBERNETES_VERSION src
  src=$(go_module_dir "k8s.io/kubernetes@v$version")
  [ -n "$src" ] || { say "cannot download k8s.io/kubernetes v$version"; return 1; }
  {
    printf 'module %s\n\ngo 1.26\n\ngodebug default=go1.26\n\n' "$1"
    printf 'require k8s.io/kubernetes v%s\n\n' "$version"
    # kubernetes replaces its staging modules with local folders; here they come from the proxy.
    awk -v v="v0.${version#1.}" '/^replace \(/ {inblock=1; next} inblock && /^\)/ {inblock=0; next}
         inblock && /=>/ {print "replace " $1 " => " $1 " " v}' "$src/go.mod"
  } >go.mod
}

# kubernetes_ldflags: the linker flags that stamp KUBERNETES_VERSION into a build, as upstream's do
kubernetes_ldflags() {
  local version=$KUBERNETES_VERSION ldflags
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version"
  ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=${version%%.*}"
  echo "$ldflags -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
}

# kubernetes_commands STAGING COMMAND...: those commands of k8s.io/kubernetes at KUBERNETES_VERSION
kubernetes_commands() {
  local staging=$1 mod cmd ldflags
  shift
  mod=$(mktemp -d) && cd "$mod" || return 1
  kubernetes_module portablelb.local/kubernetes || return 1
  ldflags=$(kubernetes_ldflags)
  mkdir -p "$staging/bin"
  for cmd in "$@"; do
    go_build "$cmd" "$staging/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd" -ldflags "$ldflags" || { cd / && rm -rf "$mod"; return 1; }
  done
  cd / && rm -rf "$mod"
}

# build_kubernetes STAGING: the control plane and node commands, then pause as upstream builds it
# (static, from the same module's C source).
build_kubernetes() {
  local src
  kubernetes_commands "$1" kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy || return 1
  src=$(go_module_dir "k8s.io/kubernetes@v$KUBERNETES_VERSION")
  gcc -Os -Wall -Werror -static -DVERSION="v$KUBERNETES_VERSION-portable-lb" \
    -o "$1/bin/pause" "$src/build/pause/linux/pause.c" >>"$PLB_LOGS/pause.log" 2>&1 ||
    { tail -5 "$PLB_LOGS/pause.log" >&2; say "ERROR: gcc of pause failed; log: $PLB_LOGS/pause.log"; return 1; }
}

# kubectl, for the tests that drive the lab as a user would (and for the user's own use of it).
build_kubectl() { kubernetes_commands "$1" kubectl; }

# kubeadm, which the providers' node bootstrap script runs on every machine: the tests check the
# configuration it renders with `kubeadm config validate`.
build_kubeadm() { kubernetes_commands "$1" kubeadm; }

install_kubernetes() {
  install_tool kubernetes "$KUBERNETES_VERSION" build_kubernetes
  install_tool kubectl "$KUBERNETES_VERSION" build_kubectl
  install_tool kubeadm "$KUBERNETES_VERSION" build_kubeadm
}
