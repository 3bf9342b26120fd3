# What the LB image is made of in this checkout, for build.sh: the files whose contents decide the
# image (sources, lockfile, tool versions, the build itself), a hash of them (the cache key and the
# image's tag) and SOURCE_DATE_EPOCH (the last commit that changed one of them). Tests and goldens
# are left out: they never reach the image. Sourced by build.sh.

LB_IMAGE_INPUTS=(
  package.json package-lock.json tsconfig.base.json
  packages/core/package.json packages/core/tsconfig.json packages/core/src
  lb-image/package.json lb-image/tsconfig.json lb-image/src lb-image/bin lb-image/image lb-image/bird lb-image/fastpath
  scripts/versions.env scripts/image/ociImage.sh scripts/image/debianRootfs.sh
)

# lb_image_files REPO: the input files git knows or would add, sorted
lb_image_files() {
  git -C "$1" ls-files --cached --others --exclude-standard -- "${LB_IMAGE_INPUTS[@]}" |
    grep -v -e '\.test\.ts$' -e '/golden/' -e '/__snapshots__/' | LC_ALL=C sort -u |
    while read -r f; do [ -f "$1/$f" ] && echo "$f"; done
}

# lb_image_epoch REPO: the commit time of the last commit touching an input file (not a test's
# commit, or a changed test would rebuild the image)
lb_image_epoch() {
  lb_image_files "$1" | (cd "$1" && xargs -d '\n' git log -1 --format=%ct --) | sort -n | tail -1
}

# lb_image_key REPO EPOCH: 16 hex digits over every input's path and contents, and the epoch
lb_image_key() {
  { echo "epoch $2"; lb_image_files "$1" | (cd "$1" && xargs -d '\n' sha256sum); } | sha256sum | cut -c1-16
}
