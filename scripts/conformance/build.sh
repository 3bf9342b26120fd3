#!/usr/bin/env bash
# Builds what `npm run conformance` runs (issue 36), from k8s.io/kubernetes at KUBERNETES_VERSION and
# cached in the tool cache like the bootstrap's tools (not part of the bootstrap or `npm test`):
# - the suite: Kubernetes' e2e network tests (its `[sig-network] LoadBalancers` specs) in a small
#   Ginkgo main of ours (suite/main.go), not the whole e2e.test;
# - the e2e image those specs run, agnhost, built from the module's test/images/agnhost on Debian
#   (agnhost/debian-packages) as an OCI archive (scripts/image/ociImage.sh), and a KUBE_TEST_REPO_LIST
#   that makes the framework name it as the archive does.
# Run, it prints `suite=`, `images=` (space-separated archives) and `repo_list=`; run.sh sources it.
#
#   scripts/conformance/build.sh
set -uo pipefail
conformance_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/../toolenv.sh
. "$conformance_dir/../toolenv.sh"
# shellcheck source=SCRIPTDIR/../bootstrap/kubernetes.sh
. "$conformance_dir/../bootstrap/kubernetes.sh"
# shellcheck source=SCRIPTDIR/../image/debianRootfs.sh
. "$conformance_dir/../image/debianRootfs.sh"

# Where the framework looks for its e2e images (manifest.go's promoterE2eRegistry), mapped to the
# lab's own names (every lab image is localhost/portable-lb/...; containerd stores them so).
CONFORMANCE_REGISTRY=localhost/portable-lb/e2e-test-images

# conformance_key FILE...: a cache key from the files (under scripts/conformance) and Go's version
conformance_key() {
  { go version; (cd "$conformance_dir" && sha256sum build.sh "$@"); } | sha256sum | cut -c1-12
}
CONFORMANCE_SUITE_VERSION=$KUBERNETES_VERSION-$(conformance_key suite/main.go)
CONFORMANCE_IMAGES_VERSION=$KUBERNETES_VERSION-$(conformance_key agnhost/debian-packages ../image/ociImage.sh ../image/debianRootfs.sh)
conformance_suite() { echo "$(tool_dir conformance-suite "$CONFORMANCE_SUITE_VERSION")/bin/e2e-network"; }
conformance_images() { echo "$(tool_dir conformance-images "$CONFORMANCE_IMAGES_VERSION")/agnhost.oci.tar"; }
conformance_repo_list() { echo "$(tool_dir conformance-images "$CONFORMANCE_IMAGES_VERSION")/repo-list.yaml"; }

# build_conformance_suite STAGING: suite/main.go in a wrapper module requiring k8s.io/kubernetes
build_conformance_suite() {
  local mod rc
  mod=$(mktemp -d) && cd "$mod" || return 1
  mkdir suite && cp "$conformance_dir/suite/main.go" suite/ && kubernetes_module portablelb.local/conformance &&
    go_build conformance-suite "$1/bin/e2e-network" ./suite -ldflags "$(kubernetes_ldflags)"
  rc=$?
  cd / && rm -rf "$mod"
  [ $rc -eq 0 ] && "$1/bin/e2e-network" --version >/dev/null
}

# build_conformance_images STAGING: agnhost at the tag the framework asks for, and the repo list
build_conformance_images() {
  local staging=$1 src tag mod rc rootfs epoch log=$PLB_LOGS/conformance-images.log
  src=$(go_module_dir "k8s.io/kubernetes@v$KUBERNETES_VERSION") || return 1
  tag=$(sed -n 's/.*configs\[Agnhost\] = Config{list.PromoterE2eRegistry, "agnhost", "\([^"]*\)"}.*/\1/p' "$src/test/utils/image/manifest.go")
  # The source must be the image the framework names (both move together in a Kubernetes release).
  if [ -z "$tag" ] || [ "$tag" != "$(cat "$src/test/images/agnhost/VERSION")" ]; then
    say "ERROR: agnhost's tag in test/utils/image/manifest.go ('$tag') is not test/images/agnhost/VERSION's"
    return 1
  fi
  mod=$(mktemp -d) && cd "$mod" || return 1
  # Static, as upstream's image-util.sh builds it.
  kubernetes_module portablelb.local/conformance &&
    CGO_ENABLED=0 go_build agnhost "$staging/agnhost" k8s.io/kubernetes/test/images/agnhost -ldflags "-s -w -X main.Version=$tag"
  rc=$?
  cd / && rm -rf "$mod"
  [ $rc -eq 0 ] || return 1
  rootfs=$staging/rootfs
  # Reproducible: the last commit of these scripts is the image's time (mmdebstrap's too).
  epoch=$(git -C "$REPO_ROOT" log -1 --format=%ct -- scripts/conformance)
  export SOURCE_DATE_EPOCH=${epoch:-0}
  debian_rootfs "$rootfs" "$log" "$conformance_dir/agnhost/debian-packages" || return 1
  install -d -m 755 "$rootfs/uploads" # netexec's /upload writes there
  "$REPO_ROOT/scripts/image/ociImage.sh" --rootfs "$rootfs" --add "$staging/agnhost:/agnhost" \
    --out "$staging/agnhost.oci.tar" --ref "$CONFORMANCE_REGISTRY/agnhost:$tag" --timestamp "$SOURCE_DATE_EPOCH" \
    --entrypoint '["/agnhost"]' --cmd '["pause"]' >"$staging/agnhost.digest" 2>>"$log" ||
    { tail -n 5 "$log" >&2; return 1; }
  rm -rf "$rootfs" "$staging/agnhost"
  printf '# KUBE_TEST_REPO_LIST: the e2e images under the names the lab nodes store them by.\npromoterE2eRegistry: %s\n' \
    "$CONFORMANCE_REGISTRY" >"$staging/repo-list.yaml"
}

install_conformance() {
  local cmd
  tool_ready conformance-suite "$CONFORMANCE_SUITE_VERSION" && tool_ready conformance-images "$CONFORMANCE_IMAGES_VERSION" &&
    return 0
  for cmd in go buildah mmdebstrap; do
    command -v "$cmd" >/dev/null || die "$cmd is missing: run 'npm run bootstrap' first"
  done
  mkdir -p "$PLB_TOOLS" "$PLB_LOGS"
  # The bootstrap's lock: one set of Go builds at a time per cache (memory).
  exec 9>"$PLB_CACHE/.lock"
  flock -n 9 || { say "a bootstrap is running on $PLB_CACHE; waiting for it"; flock 9; }
  install_tool conformance-suite "$CONFORMANCE_SUITE_VERSION" build_conformance_suite
  install_tool conformance-images "$CONFORMANCE_IMAGES_VERSION" build_conformance_images
  exec 9>&-
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  install_conformance
  printf 'suite=%s\nimages=%s\nrepo_list=%s\n' "$(conformance_suite)" "$(conformance_images)" "$(conformance_repo_list)"
fi
