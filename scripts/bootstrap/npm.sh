# The workspace's npm dependencies, installed with Node 24 from the committed lockfile.
# Sourced by bootstrap.sh.

install_npm_dependencies() {
  local stamp=$REPO_ROOT/node_modules/.portable-lb-lock-hash want
  want="$(node --version) $(sha256sum "$REPO_ROOT/package-lock.json" | cut -d' ' -f1)"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  say "installing npm dependencies (npm ci)"
  (cd "$REPO_ROOT" && npm ci --prefer-offline --no-audit --no-fund >"$PLB_LOGS/npm-ci.log" 2>&1) ||
    { tail -15 "$PLB_LOGS/npm-ci.log" >&2; die "npm ci failed; log: $PLB_LOGS/npm-ci.log"; }
  echo "$want" >"$stamp"
}
