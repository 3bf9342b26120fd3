# Shared helpers for the bootstrap scripts: paths, logging, locking, and Go wrapper-module builds.
# Sourced, never run.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../versions.env
. "$REPO_ROOT/scripts/versions.env"

# Built tools live outside the clone, keyed by version, so a fresh clone (as CI makes) reuses them.
PLB_CACHE=${PORTABLE_LB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/portable-lb}
PLB_TOOLS=$PLB_CACHE/tools
PLB_LOGS=$PLB_CACHE/logs
# Go builds of pulumi-kubernetes peak at ~4.3 GB with 2 parallel compiles; keep it at 2 by default.
PLB_GO_PARALLEL=${PORTABLE_LB_GO_PARALLEL:-2}
# The compiler's and linker's GC target (Go's default is 100). A cold etcd build, three runs each:
# 84-92 s of user CPU at 100, 76-84 at 200, 71-76 at 400, for a 20-50% higher peak per process.
PLB_GO_GC=${PORTABLE_LB_GO_GC:-400}
# Every Go build's compile flags: a build reuses another's packages only where these match.
PLB_GO_COMPILE_FLAGS="-trimpath -gcflags=all=-dwarf=false"

say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { printf 'bootstrap: ERROR: %s\n' "$*" >&2; exit 1; }

# The BIRD build's cache key: Debian's version and a hash of what turns it into ours.
BIRD_TOOL_VERSION=$BIRD_DEBIAN_VERSION-$(cat "$REPO_ROOT"/lb-image/bird/build.sh "$REPO_ROOT"/lb-image/bird/*.patch | sha256sum | cut -c1-12)
# CoreDNS's plugins our build leaves out (coredns.sh), and so its cache key, which the image's key
# (images.sh) and toolenv.sh read too.
COREDNS_LEFT_OUT="azure clouddns route53 nomad trace geoip etcd"
COREDNS_TOOL_VERSION=$COREDNS_VERSION-$(echo "$COREDNS_LEFT_OUT" | sha256sum | cut -c1-8)

# The fast path's cache key (fastpath.sh): a hash of its folder's files (its Go tests too, which only
# its build runs, so a change to them alone is still run; not its docs) and of clang's version;
# toolenv.sh and the image read it too.
FASTPATH_TOOL_VERSION=$( { clang-14 --version 2>/dev/null | head -1; cd "$REPO_ROOT/lb-image/fastpath" &&
  find . -type f ! -name '*.md' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-12)

# The Python SDK generator's cache key (python.sh): the CLI's version and a hash of its source.
PULUMI_PYTHON_SDKGEN_TOOL_VERSION=$PULUMI_VERSION-$(sha256sum "$REPO_ROOT/scripts/pulumi-python-sdkgen/main.go" | cut -c1-12)
# The Python programs' venv's key (python.sh): a hash of its requirements; toolenv.sh reads it too.
PULUMI_PYTHON_VENV_VERSION=$(echo "$PULUMI_PYTHON_VENV_REQUIREMENTS" | sha256sum | cut -c1-12)

# tool_dir NAME VERSION -> the cache folder holding that build
tool_dir() { printf '%s/%s-%s' "$PLB_TOOLS" "$1" "$2"; }
# A build counts only once its stamp exists; builds happen in a temp folder and move in atomically.
tool_ready() { [ -f "$(tool_dir "$1" "$2")/.complete" ]; }

# install_tool NAME VERSION FUNCTION [ARG...]: runs FUNCTION ARG... STAGING_DIR unless already cached.
install_tool() {
  local name=$1 version=$2 fn=$3 dest staging
  shift 3
  dest=$(tool_dir "$name" "$version")
  tool_ready "$name" "$version" && return 0
  say "building $name $version (cached in $dest)"
  staging=$(mktemp -d "$PLB_TOOLS/.staging-$name-XXXXXX")
  local start=$SECONDS
  # The build function prints its own one-line reason; here we only clean up and stop.
  if ! ( "$fn" "$@" "$staging" ); then
    rm -rf "$staging"
    exit 1
  fi
  touch "$staging/.complete"
  rm -rf "$dest"
  mv "$staging" "$dest"
  say "$name $version ready in $((SECONDS - start)) s"
}

# go_build LOGNAME OUTPUT PACKAGE [go build args...]: a build in the current wrapper module that
# turns an out-of-memory kill into one clear line, and records the peak memory in the log. No DWARF
# is generated: every tool is linked stripped (-s -w) anyway, and skipping it took a cold
# kube-apiserver build from 241 s to 218 s (user CPU 380 s to 338 s).
go_build() {
  local logname=$1 out=$2 pkg=$3 log rc
  shift 3
  log=$PLB_LOGS/$logname.log
  /usr/bin/time -f 'peak_rss_kb=%M elapsed_s=%e' -a -o "$log.time" \
    env GOFLAGS=-mod=mod GONOSUMDB=github.com/pulumi GOTOOLCHAIN=local GOGC="$PLB_GO_GC" \
    go build -p "$PLB_GO_PARALLEL" $PLB_GO_COMPILE_FLAGS -o "$out" "$@" "$pkg" >>"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    tail -n 15 "$log" >&2
    if [ $rc -ge 128 ] || grep -qE 'signal: killed|cannot allocate memory|out of memory' "$log"; then
      say "ERROR: go build of $pkg was killed, most likely out of memory (a cold bootstrap wants ~9 GB free). Free memory, or set PORTABLE_LB_GO_PARALLEL=1 and PORTABLE_LB_GO_GC=100 (slower, less memory), then rerun. Log: $log"
    else
      say "ERROR: go build of $pkg failed (exit $rc). Log: $log"
    fi
    return 1
  fi
  tail -n 1 "$log.time" | sed "s|^|bootstrap: $logname: |" >&2
}

# go_module_dir MODULE@VERSION -> where the module proxy download landed (read-only).
go_module_dir() {
  GONOSUMDB=github.com/pulumi GOFLAGS=-mod=mod go mod download -json "$1" 2>>"$PLB_LOGS/go-download.log" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

need_memory_gb() {
  local avail_kb
  avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
  [ "$avail_kb" -ge $(($1 * 1024 * 1024)) ] ||
    die "only $((avail_kb / 1024)) MB of memory is free; the Go builds need about $1 GB. Stop other work (a stale control plane? run 'npm run control-plane -- down') and rerun."
}

# install_venv NAME VERSION WHAT PIP_REQUIREMENT...: a Python venv in the cache, keyed by VERSION,
# with the requirements installed from PyPI. A venv's scripts name its own path, so it is built
# where it stays (not moved in from a staging folder as install_tool does).
install_venv() {
  local name=$1 version=$2 what=$3 dest log
  shift 3
  dest=$(tool_dir "$name" "$version")
  log=$PLB_LOGS/$name.log
  tool_ready "$name" "$version" && return 0
  command -v python3 >/dev/null || die "python3 is not installed; $what needs it"
  say "installing $* (cached in $dest)"
  rm -rf "$dest" && mkdir -p "$dest"
  if ! { python3 -m venv "$dest/venv" >>"$log" 2>&1 &&
    "$dest/venv/bin/pip" install --disable-pip-version-check -q "$@" >>"$log" 2>&1; }; then
    tail -n 5 "$log" >&2
    rm -rf "$dest"
    die "installing $* from PyPI failed; log: $log"
  fi
  touch "$dest/.complete"
}
