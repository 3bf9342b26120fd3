# nginx for the lab's throughput benchmark (nginx as the load balancer, the thesis's Fig. 6.4
# baseline). Only the binary is taken: Debian's package is fetched with `apt-get download` and
# unpacked with `dpkg -x`, never installed, so no nginx service starts on this machine. Cached by
# the archive's candidate version. Sourced by bootstrap.sh.

nginx_version() { apt-cache show --no-all-versions nginx 2>/dev/null | sed -n 's/^Version: //p'; }

build_nginx() {
  local staging=$1 deb
  (cd "$staging" && apt-get download -qq -o APT::Sandbox::User=root nginx) >>"$PLB_LOGS/nginx.log" 2>&1 || {
    tail -n 3 "$PLB_LOGS/nginx.log" >&2
    say "ERROR: apt-get download nginx failed; log: $PLB_LOGS/nginx.log"
    return 1
  }
  deb=$(ls "$staging"/nginx_*.deb)
  dpkg -x "$deb" "$staging/root" && rm -f "$deb"
  mkdir -p "$staging/bin" && mv "$staging/root/usr/sbin/nginx" "$staging/bin/nginx" && rm -rf "$staging/root"
}

install_nginx() {
  NGINX_VERSION=$(nginx_version)
  [ -n "$NGINX_VERSION" ] || die "Debian's package lists have no nginx; run apt-get update and rerun."
  install_tool nginx "$NGINX_VERSION" build_nginx
}
