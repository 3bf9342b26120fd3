# The DSR fast path (lb-image/fastpath): its tc BPF programs and the LB pod's loader, built with
# Debian's clang (APT_PACKAGES) and Go. The LB image ships the build; tests outside the image find it
# through toolenv.sh (PORTABLE_LB_FASTPATH). Sourced by bootstrap.sh and the image build. The cache key
# (common.sh) is a hash of the folder, so any change to it rebuilds it once.

build_fastpath() { "$REPO_ROOT/lb-image/fastpath/build.sh" "$1" >>"$PLB_LOGS/fastpath.log" 2>&1 || {
  tail -n 15 "$PLB_LOGS/fastpath.log" >&2
  say "ERROR: the fast path did not build; log: $PLB_LOGS/fastpath.log"
  return 1
}; }

install_fastpath() { install_tool fastpath "$FASTPATH_TOOL_VERSION" build_fastpath; }
