# Programs taken from a Debian package without installing it: the package is fetched with
# `apt-get download` and unpacked with `dpkg -x`, so none of its services starts on this machine
# (nginx, docker-registry). Cached by the archive's candidate version. Sourced by bootstrap.sh.

# deb_version PACKAGE: the candidate version in the archive
deb_version() { apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

# build_deb_binary STAGING: STAGING/bin/ gets the file DEB_PATH of the package DEB_PACKAGE
build_deb_binary() {
  local staging=$1 log=$PLB_LOGS/$DEB_PACKAGE.log deb
  (cd "$staging" && apt-get download -qq -o APT::Sandbox::User=root "$DEB_PACKAGE") >>"$log" 2>&1 || {
    tail -n 3 "$log" >&2
    say "ERROR: apt-get download $DEB_PACKAGE failed; log: $log"
    return 1
  }
  deb=$(ls "$staging/$DEB_PACKAGE"_*.deb)
  dpkg -x "$deb" "$staging/root" && rm -f "$deb"
  mkdir -p "$staging/bin" && mv "$staging/root$DEB_PATH" "$staging/bin/" && rm -rf "$staging/root"
}

# install_deb_binary PACKAGE PATH: tool PACKAGE (cached by its version) with bin/ holding PATH's file
install_deb_binary() {
  local version
  version=$(deb_version "$1")
  [ -n "$version" ] || die "Debian's package lists have no $1; run apt-get update and rerun."
  DEB_PACKAGE=$1 DEB_PATH=$2 install_tool "$1" "$version" build_deb_binary
}
