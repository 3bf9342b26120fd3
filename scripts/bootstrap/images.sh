# The OCI images we build (scripts/image/ociImage.sh), for the tests and the lab: the lab's own images
# (pause: the kubelets' pod sandbox; flannel: its DaemonSet; busybox: the demo web app and the node
# tests' userland) and the LB image (lb-image/image/build.sh, which caches its own build keyed by its
# inputs). Sourced by toolenv.sh, which names each lab image's archive and reference
# (PORTABLE_LB_<NAME>_IMAGE_ARCHIVE / _REF); bootstrap.sh calls install_images after the npm
# dependencies (the LB image's application is compiled from them).

# lab_image_sources NAME: the files that make lab image NAME (its cache key covers them)
lab_image_sources() { echo "scripts/image/$1 scripts/image/ociImage.sh scripts/image/debianRootfs.sh"; }
# lab_image_tool NAME: what else decides it (a tool's version)
lab_image_tool() {
  case $1 in
  pause) echo "kubernetes $KUBERNETES_VERSION" ;;
  flannel) echo "flannel $FLANNEL_VERSION" ;;
  busybox) echo "busybox-static $(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null)" ;;
  esac
}
# lab_image_version NAME: the cache key, a hash of its sources and tool
lab_image_version() {
  # shellcheck disable=SC2046
  { lab_image_tool "$1"; (cd "$REPO_ROOT" && find $(lab_image_sources "$1") -type f -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-12
}
# lab_image_ref NAME: the name the image carries (and containerd stores, and pods use)
lab_image_ref() { echo "localhost/portable-lb/$1:$(lab_image_version "$1")"; }
# lab_image_archive NAME: the OCI archive to `ctr images import`
lab_image_archive() { echo "$(tool_dir "$1-image" "$(lab_image_version "$1")")/$1.oci.tar"; }

# build_lab_image NAME STAGING: one image, reproducibly (the last commit of its sources as its time)
build_lab_image() {
  local name=$1 out=$2/$1.oci.tar ref epoch log=$PLB_LOGS/$1-image.log args
  ref=$(lab_image_ref "$name")
  # shellcheck disable=SC2046
  epoch=$(git -C "$REPO_ROOT" log -1 --format=%ct -- $(lab_image_sources "$name"))
  case $name in
  pause) args=("$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin/pause" "$out" "$ref" "${epoch:-0}") ;;
  flannel) args=("$(tool_dir flannel "$FLANNEL_VERSION")/bin/flanneld" "$out" "$ref" "${epoch:-0}" "$log.debian") ;;
  busybox) args=("$out" "$ref" "${epoch:-0}") ;;
  esac
  "$REPO_ROOT/scripts/image/$name/build.sh" "${args[@]}" >"$2/digest" 2>>"$log" ||
    { tail -n 5 "$log" >&2; return 1; }
}

LAB_IMAGES=(pause flannel busybox)

# lab_image_env: exports each lab image's archive and reference for the lab and the tests
lab_image_env() {
  local name upper
  for name in "${LAB_IMAGES[@]}"; do
    upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
    export "PORTABLE_LB_${upper}_IMAGE_ARCHIVE=$(lab_image_archive "$name")"
    export "PORTABLE_LB_${upper}_IMAGE_REF=$(lab_image_ref "$name")"
  done
}

install_images() {
  local name
  for name in "${LAB_IMAGES[@]}"; do
    install_tool "$name-image" "$(lab_image_version "$name")" build_lab_image "$name"
  done
  "$REPO_ROOT/lb-image/image/build.sh" || die "the LB image did not build (above; log: $PLB_LOGS/lb-image.log)"
}
