#!/usr/bin/env bash
# Installs everything the tests and the lab need, from package registries only. Idempotent: tools
# are cached by version outside the clone ($PORTABLE_LB_CACHE, default ~/.cache/portable-lb), so a
# second run, even from a new clone, only checks stamps and runs `npm ci` from npm's cache.
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/toolenv.sh"
. "$here/bootstrap/apt.sh"
. "$here/bootstrap/node.sh"
. "$here/bootstrap/pulumi.sh"
. "$here/bootstrap/python.sh"
. "$here/bootstrap/kubernetes.sh"
. "$here/bootstrap/cni.sh"
. "$here/bootstrap/flannel.sh"
. "$here/bootstrap/etcd.sh"
. "$here/bootstrap/coredns.sh"
. "$here/bootstrap/bird.sh"
. "$here/bootstrap/fastpath.sh"
. "$here/bootstrap/debBinary.sh"
. "$here/bootstrap/nginx.sh"
. "$here/bootstrap/named.sh"
. "$here/bootstrap/dockerRegistry.sh"
. "$here/bootstrap/ipvsGuest.sh"
. "$here/bootstrap/moto.sh"
. "$here/bootstrap/npm.sh"

mkdir -p "$PLB_TOOLS" "$PLB_LOGS" "$PULUMI_HOME"
command -v go >/dev/null || die "Go is not installed; install Go >= 1.26 (the tools are built from the Go module proxy) and rerun."
start=$SECONDS

# One bootstrap at a time per cache: a second one waits instead of building the same tool twice.
exec 9>"$PLB_CACHE/.lock"
flock -n 9 || { say "another bootstrap is running on $PLB_CACHE; waiting for it"; flock 9; }

install_apt_packages
install_node
if ! { tool_ready pulumi "$PULUMI_VERSION" && tool_ready pulumi-language-nodejs "$PULUMI_LANGUAGE_NODEJS_VERSION" &&
  tool_ready pulumi-kubernetes "$PULUMI_KUBERNETES_VERSION" && tool_ready kubernetes "$KUBERNETES_VERSION" &&
  tool_ready kubectl "$KUBERNETES_VERSION" && tool_ready kubeadm "$KUBERNETES_VERSION"; }; then
  need_memory_gb 9
fi
# The downloads that build nothing run in one background job, one after another. The builds run in
# two chains side by side: one build alone left the CPUs idle through its module downloads, its
# links and its serial packages (83% busy over a cold bootstrap).
( install_npm_dependencies && install_moto && install_pulumi_python_venv && install_ipvs_guest && install_nginx && install_named &&
  install_docker_registry ) &
downloads=$!
# The Python language host and SDK generator reuse the CLI's compiled packages: ~10 s after it.
( install_pulumi && install_pulumi_python ) &
pulumi_builds=$!
install_kubernetes
install_cni_plugins
install_flannel
install_etcd
install_coredns
install_bird
install_fastpath
wait "$downloads" || die "a download step failed (its own line above says which)"
# The images need no Pulumi build, so they are made while the Pulumi chain (the longer) ends.
install_images
install_control_plane_images
wait "$pulumi_builds" || die "a Pulumi build failed (its own line above says which)"
install_pulumi_plugins
say "all tools ready in $((SECONDS - start)) s (cache: $PLB_CACHE)"
