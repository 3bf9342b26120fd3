# Debian packages the tests need. Sourced by bootstrap.sh.

install_apt_packages() {
  local missing=() pkg
  for pkg in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${missing[*]}. Run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  say "installing Debian packages: ${missing[*]}"
  apt-get update -qq >"$PLB_LOGS/apt.log" 2>&1 || { tail -5 "$PLB_LOGS/apt.log" >&2; die "apt-get update failed; log: $PLB_LOGS/apt.log"; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$PLB_LOGS/apt.log" 2>&1 ||
    { tail -5 "$PLB_LOGS/apt.log" >&2; die "apt-get install ${missing[*]} failed; log: $PLB_LOGS/apt.log"; }
}
