# The OCI images we build (scripts/image/ociImage.sh), for the tests and the lab: the lab's own images
# (pause: the kubelets' pod sandbox; flannel: its DaemonSet; busybox: the node tests' userland;
# demo-web: the demo web app's server), the control plane kubeadm deploys (kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns: for the onprem bootstrap's
# machines, which reach no registry) and the LB image (lb-image/image/build.sh, which caches its own build keyed by its
# inputs). Sourced by toolenv.sh, which names each image's archive and reference
# (PORTABLE_LB_<NAME>_IMAGE_ARCHIVE / _REF, NAME upper-cased with _ for -); bootstrap.sh calls
# install_images after the npm dependencies (the LB image's application is compiled from them) and
# install_control_plane_images after them.

LAB_IMAGES=(pause flannel busybox demo-web)
# Named as `kubeadm config images list` names them, so kubeadm with imageRepository
# localhost/portable-lb finds them (pause is the lab's, which a machine tags with kubeadm's name).
CONTROL_PLANE_IMAGES=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns)

# lab_image_sources NAME: the files that make lab image NAME (its cache key covers them)
lab_image_sources() {
  case $1 in
  kube-apiserver | kube-controller-manager | kube-scheduler | etcd | coredns) echo "scripts/image/control-plane scripts/image/ociImage.sh" ;;
  flannel | kube-proxy) echo "scripts/image/$1 scripts/image/debianImage.sh scripts/image/ociImage.sh scripts/image/debianRootfs.sh" ;;
  demo-web) echo "scripts/image/demo-web scripts/image/ociImage.sh" ;;
  *) echo "scripts/image/$1 scripts/image/ociImage.sh scripts/image/debianRootfs.sh" ;;
  esac
}
# lab_image_tool NAME: what else decides it (a tool's version)
lab_image_tool() {
  case $1 in
  pause) echo "kubernetes $KUBERNETES_VERSION" ;;
  flannel) echo "flannel $FLANNEL_VERSION" ;;
  busybox) echo "busybox-static $(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null)" ;;
  demo-web) go version ;;
  # The glibc the Kubernetes commands were linked against and the CA bundle go in with them.
  kube-apiserver | kube-controller-manager | kube-scheduler)
    echo "kubernetes $KUBERNETES_VERSION $(dpkg-query -W -f='${Package} ${Version} ' libc6 ca-certificates 2>/dev/null)" ;;
  kube-proxy) echo "kubernetes $KUBERNETES_VERSION" ;;
  etcd) echo "etcd $ETCD_VERSION $(dpkg-query -W -f='${Package} ${Version}' ca-certificates 2>/dev/null)" ;;
  coredns) echo "coredns $COREDNS_TOOL_VERSION $(dpkg-query -W -f='${Package} ${Version}' ca-certificates 2>/dev/null)" ;;
  esac
}
# lab_image_version NAME: the cache key, a hash of its sources and tool
lab_image_version() {
  # shellcheck disable=SC2046
  { lab_image_tool "$1"; (cd "$REPO_ROOT" && find $(lab_image_sources "$1") -type f -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-12
}
# lab_image_ref NAME: the name the image carries (and containerd stores, and pods use): a lab image's
# tag is its cache key; a control-plane image's is kubeadm's (etcd's -0: the image's revision).
lab_image_ref() {
  case $1 in
  kube-*) echo "localhost/portable-lb/$1:v$KUBERNETES_VERSION" ;;
  etcd) echo "localhost/portable-lb/$1:$ETCD_VERSION-0" ;;
  coredns) echo "localhost/portable-lb/$1:v$COREDNS_VERSION" ;;
  *) echo "localhost/portable-lb/$1:$(lab_image_version "$1")" ;;
  esac
}
# lab_image_archive NAME: the OCI archive to `ctr images import`
lab_image_archive() { echo "$(tool_dir "$1-image" "$(lab_image_version "$1")")/$1.oci.tar"; }

# build_lab_image NAME STAGING: one image, reproducibly (the last commit of its sources as its time)
build_lab_image() {
  local name=$1 out=$2/$1.oci.tar ref epoch log=$PLB_LOGS/$1-image.log script=$1 args
  ref=$(lab_image_ref "$name")
  # shellcheck disable=SC2046
  epoch=$(git -C "$REPO_ROOT" log -1 --format=%ct -- $(lab_image_sources "$name"))
  case $name in
  pause) args=("$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin/pause" "$out" "$ref" "${epoch:-0}") ;;
  flannel) args=("$(tool_dir flannel "$FLANNEL_VERSION")/bin/flanneld" "$out" "$ref" "${epoch:-0}" "$log.debian") ;;
  busybox | demo-web) args=("$out" "$ref" "${epoch:-0}") ;;
  kube-apiserver | kube-controller-manager | kube-scheduler)
    script=control-plane args=("$name" "$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin/$name" "$out" "$ref" "${epoch:-0}") ;;
  etcd) script=control-plane args=("$name" "$(tool_dir etcd "$ETCD_VERSION")/bin/etcd" "$out" "$ref" "${epoch:-0}") ;;
  coredns) script=control-plane args=("$name" "$(tool_dir coredns "$COREDNS_TOOL_VERSION")/bin/coredns" "$out" "$ref" "${epoch:-0}") ;;
  kube-proxy) args=("$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin/kube-proxy" "$out" "$ref" "${epoch:-0}" "$log.debian") ;;
  esac
  "$REPO_ROOT/scripts/image/$script/build.sh" "${args[@]}" >"$2/digest" 2>>"$log" ||
    { tail -n 5 "$log" >&2; return 1; }
}

# lab_image_env: exports each image's archive and reference for the lab and the tests
lab_image_env() {
  local name upper
  for name in "${LAB_IMAGES[@]}" "${CONTROL_PLANE_IMAGES[@]}"; do
    upper=$(echo "$name" | tr '[:lower:]-' '[:upper:]_')
    export "PORTABLE_LB_${upper}_IMAGE_ARCHIVE=$(lab_image_archive "$name")"
    export "PORTABLE_LB_${upper}_IMAGE_REF=$(lab_image_ref "$name")"
  done
}

# install_built_images NAME...: each image unless its cache key's build is there
install_built_images() {
  local name
  for name in "$@"; do
    install_tool "$name-image" "$(lab_image_version "$name")" build_lab_image "$name"
  done
}

install_images() {
  install_built_images "${LAB_IMAGES[@]}"
  "$REPO_ROOT/lb-image/image/build.sh" || die "the LB image did not build (above; log: $PLB_LOGS/lb-image.log)"
}

# After install_kubernetes and install_etcd, whose commands they carry.
install_control_plane_images() { install_built_images "${CONTROL_PLANE_IMAGES[@]}"; }
