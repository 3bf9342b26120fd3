# The OCI images we build (scripts/image/ociImage.sh), for the tests and the lab: the pause image
# (the kubelets' pod sandbox) and the LB image (lb-image/image/build.sh, which caches its own build
# keyed by its inputs). Sourced by toolenv.sh (which names the pause image for the lab); bootstrap.sh
# calls install_images after the npm dependencies (the LB image's application is compiled from them).

PAUSE_IMAGE_SOURCES=(scripts/image/pause scripts/image/ociImage.sh)
# The pause image's cache key: a hash of its sources and the node version whose pause it packs.
pause_image_version() {
  { echo "kubernetes-node $KUBERNETES_NODE_VERSION"; (cd "$REPO_ROOT" && find "${PAUSE_IMAGE_SOURCES[@]}" -type f -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-12
}
# The name the pause image carries (and containerd stores): give it to the kubelet's sandbox image.
pause_image_ref() { echo "localhost/portable-lb/pause:$(pause_image_version)"; }
# The archive: `ctr images import` it.
pause_image_archive() { echo "$(tool_dir pause-image "$(pause_image_version)")/pause.oci.tar"; }

build_pause_image() {
  local epoch
  epoch=$(git -C "$REPO_ROOT" log -1 --format=%ct -- "${PAUSE_IMAGE_SOURCES[@]}")
  "$REPO_ROOT/scripts/image/pause/build.sh" "$(tool_dir kubernetes-node "$KUBERNETES_NODE_VERSION")/bin/pause" "$1/pause.oci.tar" "$(pause_image_ref)" "${epoch:-0}" \
    >"$1/digest" 2>>"$PLB_LOGS/pause-image.log" || { tail -n 5 "$PLB_LOGS/pause-image.log" >&2; return 1; }
}

install_images() {
  install_tool pause-image "$(pause_image_version)" build_pause_image
  "$REPO_ROOT/lb-image/image/build.sh" || die "the LB image did not build (above; log: $PLB_LOGS/lb-image.log)"
}
