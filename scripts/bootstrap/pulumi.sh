# Pulumi CLI, Node language host and the kubernetes provider plugin, all built from the Go module
# proxy (no binary downloads reach this machine). Sourced by bootstrap.sh.

# pulumi_wrapper_go_mod NAME: the go.mod of a wrapper module on pkg/v3 and sdk/v3 at the CLI's version.
# pkg/v3 cannot be `go install`ed (its go.mod has replace lines), so a wrapper module pins it; every
# build on it (the CLI's, the Python SDK generator's) shares the compiled packages.
pulumi_wrapper_go_mod() {
  cat >go.mod <<GOMOD
module portablelb.local/$1

go 1.26

require (
	github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION
	github.com/pulumi/pulumi/sdk/v3 v$PULUMI_VERSION
)

replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
GOMOD
}

build_pulumi_cli() {
  local staging=$1 mod
  mod=$(mktemp -d) && cd "$mod" || return 1
  pulumi_wrapper_go_mod pulumi-cli
  mkdir -p "$staging/bin"
  go_build pulumi-cli "$staging/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION"
  local rc=$?
  cd / && rm -rf "$mod"
  return $rc
}

# build_language_host LANG VERSION STAGING: Pulumi's language host for LANG from sdk/v3 at VERSION
# (the last versions that hold them: later ones are modules of their own, which the proxy refuses).
build_language_host() {
  local lang=$1 version=$2 staging=$3 mod
  mod=$(mktemp -d) && cd "$mod" || return 1
  cat >go.mod <<GOMOD
module portablelb.local/pulumi-language-$lang

go 1.26

require github.com/pulumi/pulumi/sdk/v3 v$version
GOMOD
  mkdir -p "$staging/bin"
  go_build "pulumi-language-$lang" "$staging/bin/pulumi-language-$lang" \
    "github.com/pulumi/pulumi/sdk/v3/$lang/cmd/pulumi-language-$lang" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$version"
  local rc=$?
  cd / && rm -rf "$mod"
  return $rc
}

build_pulumi_language_nodejs() {
  build_language_host nodejs "$PULUMI_LANGUAGE_NODEJS_VERSION" "$1"
}

build_pulumi_kubernetes() {
  local staging=$1 mod src
  mod=$(mktemp -d) && cd "$mod" || return 1
  src=$(go_module_dir "github.com/pulumi/pulumi-kubernetes/provider/v4@$PULUMI_KUBERNETES_PROVIDER_MODULE_VERSION")
  [ -n "$src" ] || { say "cannot download the pulumi-kubernetes provider module"; return 1; }
  # main.go embeds a file made by `go generate`, which cannot run in the read-only module cache,
  # so the command's sources are copied into the wrapper and generated here.
  cp "$src"/cmd/pulumi-resource-kubernetes/{main.go,generate.go,schema.json,terraform-mapping.json} .
  chmod u+w ./*
  {
    printf 'module portablelb.local/pulumi-resource-kubernetes\n\ngo 1.26\n\n'
    printf 'require (\n\tgithub.com/pulumi/pulumi-kubernetes/provider/v4 %s\n\tgithub.com/pulumi/pulumi-kubernetes/sdk/v4 v%s\n)\n\n' \
      "$PULUMI_KUBERNETES_PROVIDER_MODULE_VERSION" "$PULUMI_KUBERNETES_VERSION"
    # Keep the provider's own replace lines that point at other modules (not its local folders).
    awk '/^replace \(/ {inblock=1; next} inblock && /^\)/ {inblock=0; next}
         inblock && $0 !~ /=> *\.\.?\// {print "replace " $0}
         /^replace [^(]/ && $0 !~ /=> *\.\.?\// {print}' "$src/go.mod"
    printf 'replace github.com/pulumi/pulumi-kubernetes/sdk/v4 => github.com/pulumi/pulumi-kubernetes/sdk/v4 v%s\n' "$PULUMI_KUBERNETES_VERSION"
  } >go.mod
  # Its `go run` compiles as go_build does (flags, cgo off), so the build reuses the packages.
  CGO_ENABLED=0 GOFLAGS="-mod=mod $PLB_GO_COMPILE_FLAGS" GONOSUMDB=github.com/pulumi \
    GOGC=$PLB_GO_GC VERSION=$PULUMI_KUBERNETES_VERSION go generate ./main.go >>"$PLB_LOGS/pulumi-kubernetes.log" 2>&1 ||
    { tail -5 "$PLB_LOGS/pulumi-kubernetes.log" >&2; cd / && rm -rf "$mod"; return 1; }
  mkdir -p "$staging/bin"
  CGO_ENABLED=0 go_build pulumi-kubernetes "$staging/bin/pulumi-resource-kubernetes" . \
    -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$PULUMI_KUBERNETES_VERSION"
  local rc=$?
  cd / && rm -rf "$mod"
  return $rc
}

install_pulumi() {
  install_tool pulumi "$PULUMI_VERSION" build_pulumi_cli
  install_tool pulumi-language-nodejs "$PULUMI_LANGUAGE_NODEJS_VERSION" build_pulumi_language_nodejs
  install_tool pulumi-kubernetes "$PULUMI_KUBERNETES_VERSION" build_pulumi_kubernetes
}

# The engine looks plugins up in PULUMI_HOME; installing from our built file keeps it offline.
install_pulumi_plugins() {
  local plugin_dir=$PULUMI_HOME/plugins/resource-kubernetes-v$PULUMI_KUBERNETES_VERSION
  [ -x "$plugin_dir/pulumi-resource-kubernetes" ] && return 0
  say "installing the kubernetes plugin v$PULUMI_KUBERNETES_VERSION into $PULUMI_HOME"
  pulumi plugin install resource kubernetes "v$PULUMI_KUBERNETES_VERSION" \
    --file "$(tool_dir pulumi-kubernetes "$PULUMI_KUBERNETES_VERSION")/bin/pulumi-resource-kubernetes" >&2 ||
    die "pulumi plugin install of kubernetes v$PULUMI_KUBERNETES_VERSION failed"
}
