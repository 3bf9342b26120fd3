# moto's server (PyPI `moto[server]`), the EC2 API the cloud-routes tests point the AWS SDK at.
# Installed from PyPI into a venv in the cache, keyed by MOTO_VERSION. Sourced by bootstrap.sh.

build_moto() {
  local staging=$1
  python3 -m venv "$staging/venv" >>"$PLB_LOGS/moto.log" 2>&1 &&
    "$staging/venv/bin/pip" install --disable-pip-version-check -q "moto[server]==$MOTO_VERSION" \
      >>"$PLB_LOGS/moto.log" 2>&1 || {
    tail -n 5 "$PLB_LOGS/moto.log" >&2
    say "ERROR: installing moto[server] $MOTO_VERSION from PyPI failed; log: $PLB_LOGS/moto.log"
    return 1
  }
}

# The venv's scripts name its own path, so it is built where it stays (not moved from staging).
install_moto() {
  local dest
  dest=$(tool_dir moto "$MOTO_VERSION")
  tool_ready moto "$MOTO_VERSION" && return 0
  command -v python3 >/dev/null || die "python3 is not installed; moto (the cloud-routes tests' EC2 API) needs it"
  say "installing moto[server] $MOTO_VERSION (cached in $dest)"
  rm -rf "$dest" && mkdir -p "$dest"
  build_moto "$dest" || { rm -rf "$dest"; exit 1; }
  touch "$dest/.complete"
}
