# What Python programs that use portable-lb's components (packages/component-provider) need: the
# Python language host, the Python SDK generator, and a venv with Pulumi's Python SDKs, the tests'
# and a user's starting point. Sourced by bootstrap.sh.

build_pulumi_language_python() {
  local staging=$1 src
  build_language_host python "$PULUMI_LANGUAGE_PYTHON_VERSION" "$staging" || return 1
  # The host runs every program through this script of the same module, which it expects beside itself.
  src=$(go_module_dir "github.com/pulumi/pulumi/sdk/v3@v$PULUMI_LANGUAGE_PYTHON_VERSION")
  [ -n "$src" ] || { say "cannot download github.com/pulumi/pulumi/sdk/v3@v$PULUMI_LANGUAGE_PYTHON_VERSION"; return 1; }
  install -m 755 "$src/python/cmd/pulumi-language-python-exec" "$staging/bin/"
}

# On the CLI's wrapper module (pulumi.sh), so it reuses the CLI build's compiled packages.
build_pulumi_python_sdkgen() {
  local staging=$1 mod
  mod=$(mktemp -d) && cd "$mod" || return 1
  pulumi_wrapper_go_mod pulumi-python-sdkgen
  cp "$REPO_ROOT/scripts/pulumi-python-sdkgen/main.go" .
  mkdir -p "$staging/bin"
  go_build pulumi-python-sdkgen "$staging/bin/pulumi-python-sdkgen" . -ldflags "-s -w"
  local rc=$?
  cd / && rm -rf "$mod"
  return $rc
}

# The Go builds; after the CLI's, whose module downloads and compiled packages they share.
install_pulumi_python() {
  install_tool pulumi-language-python "$PULUMI_LANGUAGE_PYTHON_VERSION" build_pulumi_language_python
  install_tool pulumi-python-sdkgen "$PULUMI_PYTHON_SDKGEN_TOOL_VERSION" build_pulumi_python_sdkgen
}

# Downloads only (PULUMI_PYTHON_VENV_REQUIREMENTS in versions.env).
install_pulumi_python_venv() {
  # shellcheck disable=SC2086 # one requirement a word
  install_venv pulumi-python "$PULUMI_PYTHON_VENV_VERSION" "the Python app stacks' venv" $PULUMI_PYTHON_VENV_REQUIREMENTS
}
