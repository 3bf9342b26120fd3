# Puts the bootstrapped tools first on PATH and points Pulumi at its cached home and a local,
# offline setup. Sourced by bootstrap.sh and with-tools; safe to source twice.
# shellcheck source=bootstrap/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap/common.sh"

export PORTABLE_LB_CACHE=$PLB_CACHE
export PATH="$(tool_dir node "$NODE_VERSION")/bin:$(tool_dir pulumi "$PULUMI_VERSION")/bin:$(tool_dir pulumi-language-nodejs "$PULUMI_LANGUAGE_NODEJS_VERSION")/bin:$(tool_dir pulumi-language-python "$PULUMI_LANGUAGE_PYTHON_VERSION")/bin:$(tool_dir pulumi-python-sdkgen "$PULUMI_PYTHON_SDKGEN_TOOL_VERSION")/bin:$(tool_dir kubernetes "$KUBERNETES_VERSION")/bin:$(tool_dir kubectl "$KUBERNETES_VERSION")/bin:$(tool_dir kubeadm "$KUBERNETES_VERSION")/bin:$(tool_dir flannel "$FLANNEL_VERSION")/bin:$(tool_dir bird "$BIRD_TOOL_VERSION")/usr/sbin:$REPO_ROOT/node_modules/@pulumi/pulumi:$REPO_ROOT/node_modules/.bin:$PATH"
# The DSR fast path's build (scripts/bootstrap/fastpath.sh): bin/portable-lb-fastpath, lib/dsr_decap.o.
export PORTABLE_LB_FASTPATH=$(tool_dir fastpath "$FASTPATH_TOOL_VERSION")
# The venv with Pulumi's Python SDKs (scripts/bootstrap/python.sh) that Python app stacks run in.
export PORTABLE_LB_PYTHON_VENV=$(tool_dir pulumi-python "$PULUMI_PYTHON_VENV_VERSION")/venv
# Where the lab nodes' containerd finds the CNI plugins (they are not commands to put on PATH).
export PORTABLE_LB_CNI_BIN=$(tool_dir cni-plugins "$CNI_PLUGINS_VERSION")/bin
# The lab's images (scripts/bootstrap/images.sh builds them): each one's archive and name.
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap/images.sh"
lab_image_env
export PULUMI_HOME=${PULUMI_HOME:-$PLB_CACHE/pulumi-home}
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
