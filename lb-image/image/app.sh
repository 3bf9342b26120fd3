# The LB image's application: packages/core and lb-image compiled from a clean copy of their sources,
# with the production dependencies of those two only. Sourced by build.sh.
# The image never loads the Pulumi program (the root package) nor core's Pulumi components, only
# modules such as `@portable-lb/core/config`, so core's @pulumi/* dependencies are dropped before the
# prune (node_modules 370 MB -> ~100 MB); lb-image/src/image.test.ts checks that no module the entry
# points import reaches @pulumi/* or a package its workspace does not declare.

# stage_app REPO DEST LOG: DEST becomes the image's /opt/portable-lb
stage_app() {
  local repo=$1 dest=$2 log=$3 work
  work=$(mktemp -d)
  (
    set -euo pipefail
    cd "$work"
    cp "$repo"/{package.json,package-lock.json,tsconfig.base.json} .
    mkdir -p packages/core lb-image
    cp -r "$repo"/packages/core/{package.json,tsconfig.json,src} packages/core/
    cp -r "$repo"/lb-image/{package.json,tsconfig.json,src,bin} lb-image/
    # The lockfile's install (bootstrap's); its workspace links are relative, so they land here.
    cp -a "$repo/node_modules" .
    rm -f node_modules/.portable-lb-lock-hash
    node node_modules/typescript/bin/tsc -b lb-image
    npm pkg delete dependencies
    npm pkg set 'workspaces=["packages/core","lb-image"]' --json
    # shellcheck disable=SC2046 # one argument per dependency
    npm pkg delete $(node -p 'Object.keys(require("./packages/core/package.json").dependencies)
      .filter((d) => d.startsWith("@pulumi/")).map((d) => `dependencies.${d}`).join(" ")') --workspace packages/core
    npm prune --omit=dev --ignore-scripts --no-audit --no-fund --offline
    # The prune leaves the scopes it emptied (@pulumi, ...).
    find node_modules -mindepth 1 -maxdepth 1 -name '@*' -type d -empty -delete
    mkdir -p "$dest"/{packages/core,lb-image}
    cp -a node_modules "$dest/"
    cp -a packages/core/{package.json,dist} "$dest/packages/core/"
    cp -a lb-image/{package.json,dist,bin} "$dest/lb-image/"
    # Build bookkeeping only.
    find "$dest" -name '*.tsbuildinfo' -delete
  ) >"$log" 2>&1
  local rc=$?
  rm -rf "$work"
  [ $rc -eq 0 ] || tail -n 20 "$log" >&2
  return $rc
}
