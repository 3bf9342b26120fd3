# The workspace's npm dependencies, installed with Node 24 at the versions in the committed lockfile.
# Sourced by bootstrap.sh.

install_npm_dependencies() {
  local stamp=$REPO_ROOT/node_modules/.portable-lb-lock-hash want
  want="$(node --version) $(sha256sum "$REPO_ROOT/package-lock.json" | cut -d' ' -f1)"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  say "installing npm dependencies"
  # Not `npm ci`: the registry reachable here serves only the Linux builds of platform-specific
  # optional packages, so the lockfile lacks the others and `npm ci` calls it out of sync.
  # `install --no-save` installs the locked versions and writes neither package.json nor the lockfile.
  (cd "$REPO_ROOT" && npm install --no-save --prefer-offline --no-audit --no-fund >"$PLB_LOGS/npm-install.log" 2>&1) ||
    { tail -15 "$PLB_LOGS/npm-install.log" >&2; die "npm install failed; log: $PLB_LOGS/npm-install.log"; }
  echo "$want" >"$stamp"
}
