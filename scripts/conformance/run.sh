#!/usr/bin/env bash
# `npm run conformance`: Kubernetes' own `[sig-network] LoadBalancers` e2e specs (Slow included), at
# KUBERNETES_VERSION, against the running lab (`npm run lab`), from the lab client's network
# namespace: the one place that reaches both the API server (through the router) and the VIPs (over
# BGP/ECMP), as a user outside the cluster would. Builds the suite and its image first (build.sh,
# cached), imports the image into the nodes that lack it, and writes a JUnit report.
#
#   npm run conformance [-- --stack NAME] [--results DIR] [--list] [SUITE FLAG...]
#
# --stack NAME    the lab stack to test (default lab: Pulumi.lab.yaml)
# --results DIR   where junit.xml and e2e.log go (default ~/.cache/portable-lb/conformance/STACK-TIME)
# --list          only list the specs that would run (Ginkgo's dry run; no lab needed)
# SUITE FLAG...   passed on to the suite, e.g. --ginkgo.skip=REGEX or --ginkgo.v
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=SCRIPTDIR/build.sh
. "$here/build.sh"
usage() { sed -n '8,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
stack=lab results='' list=false extra=()
while [ $# -gt 0 ]; do
  case $1 in
  --stack) [ $# -ge 2 ] || usage; stack=$2; shift ;;
  --results) [ $# -ge 2 ] || usage; results=$2; shift ;;
  --list) list=true ;;
  --help | -h) usage ;;
  *) extra+=("$1") ;;
  esac
  shift
done
[ -n "$stack" ] || usage
fail() { echo "conformance: $*" >&2; exit 1; }

install_conformance
suite=$(conformance_suite)
# Upstream runs them on kind with cloud-provider-kind; the framework needs no provider for them
# (skeleton: provider-independent; `local` would also claim SSH access to the nodes, which the lab lacks).
flags=(--provider=skeleton "--ginkgo.focus=\[sig-network\] LoadBalancers" --ginkgo.timeout=4h)
if $list; then
  exec "$suite" "${flags[@]}" --ginkgo.dry-run --ginkgo.v "${extra[@]}"
fi

[ "$(id -u)" -eq 0 ] || fail "entering the lab's network namespaces needs root; run it as root"
tool_ready kubectl "$KUBERNETES_VERSION" || fail "kubectl is not built: run 'npm run bootstrap' first"
# The lab's stack outputs (as `npm run lab -- outputs` reads them): its plan and admin kubeconfig.
cd "$REPO_ROOT"
export PULUMI_BACKEND_URL=${PULUMI_BACKEND_URL:-file://$PLB_CACHE/lab-state}
export PULUMI_CONFIG_PASSPHRASE=${PULUMI_CONFIG_PASSPHRASE-portable-lb-lab}
outputs=$(pulumi stack output -s "$stack" --json --show-secrets 2>/dev/null) || outputs='{}'
# shellcheck disable=SC2016 # JavaScript
lab=$(node -e '
  const o = JSON.parse(process.argv[1]), p = o.labPlan;
  if (!p || !o.kubeconfig) process.exit(1);
  console.log([p.name, p.client.netns, `https://${p.controlPlane.ip}:${p.controlPlane.port}`, o.kubeconfig,
    p.nodes.map((n) => n.name).join(",")].join("\n"));' "$outputs") ||
  fail "no lab is up (stack '$stack' in $PULUMI_BACKEND_URL has no lab outputs): run 'npm run lab' first"
{ read -r name; read -r client; read -r server; read -r admin; IFS=, read -r -a nodes; } <<<"$lab"
ip netns list | grep -q "^$client\b" ||
  fail "the lab's client namespace $client is gone (a reboot?): run 'npm run lab' to bring the lab back"
# The admin kubeconfig names the API server as this machine reaches it (127.0.0.1); the client
# reaches it at its own address, which its certificate names too. Keys stay out of the results.
kubeconfig=$(mktemp --suffix=.kubeconfig)
trap 'rm -f "$kubeconfig"' EXIT
node -e '
  const fs = require("fs"), k = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  for (const c of k.clusters) c.cluster.server = process.argv[2];
  fs.writeFileSync(process.argv[3], JSON.stringify(k));' "$admin" "$server" "$kubeconfig"
ip netns exec "$client" kubectl --kubeconfig "$kubeconfig" --request-timeout=10s get --raw /readyz >/dev/null ||
  fail "the lab's API server ($server) does not answer from its client namespace $client: is the lab healthy? ('npm run lab' heals it)"

# The image, imported as the lab imports its own (KubeletNode.importImages): into each node's
# containerd (~/.cache/portable-lb/labs/NAME/NODE/containerd.sock), namespace k8s.io, if missing.
for archive in $(conformance_images); do
  ref=$(tar -xOf "$archive" index.json | node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).manifests[0].annotations["org.opencontainers.image.ref.name"])')
  for node in "${nodes[@]}"; do
    ctr=(ctr --address "$PLB_CACHE/labs/$name/$node/containerd.sock" --namespace k8s.io)
    [ -n "$("${ctr[@]}" images ls -q "name==$ref")" ] && continue
    echo "conformance: importing $ref into $node" >&2
    "${ctr[@]}" images import "$archive" >/dev/null || fail "importing $archive into node $node failed"
  done
done

results=${results:-$PLB_CACHE/conformance/$stack-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"
echo "conformance: running the LoadBalancers specs against lab $name from $client; results in $results" >&2
rc=0
KUBE_TEST_REPO_LIST=$(conformance_repo_list) ip netns exec "$client" "$suite" "${flags[@]}" \
  --kubeconfig="$kubeconfig" --kubectl-path="$(command -v kubectl)" \
  --ginkgo.junit-report="$results/junit.xml" "${extra[@]}" 2>&1 | tee "$results/e2e.log" || rc=$?
echo "conformance: JUnit report $results/junit.xml, log $results/e2e.log" >&2
exit "$rc"
