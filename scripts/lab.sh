#!/usr/bin/env bash
# The README's main command. `npm run lab` sets up every tool on a fresh machine (as `npm test`
# does), brings the lab stack up (`pulumi up -s lab`, Pulumi.lab.yaml) and shows it working: the
# VIP, the router's ECMP route and the spread of 100 requests. A second run changes nothing and
# repairs what died (a crashed or rebooted machine's lab too).
#   npm run lab -- up [STACK...]     those stacks, in order (default: lab); each one's settings are
#                                    Pulumi.STACK.yaml: `up lab lab-b` runs a second platform beside
#                                    the first, behind the same router and client
#   npm run lab -- down [STACK...]   destroys them (default: every lab stack, the last made first)
#   npm run --silent lab -- outputs [STACK]   the stack's outputs as JSON (the lab benchmarks read it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
usage() {
  echo "usage: npm run lab [-- up [STACK...] | down [STACK...] | outputs [STACK]]" >&2
  exit 2
}
verb=${1:-up}
[ $# -eq 0 ] || shift
stacks=("$@")
case $verb in up | down | outputs) ;; *) usage ;; esac
for s in "${stacks[@]}"; do
  [ -f "Pulumi.$s.yaml" ] || {
    known=(Pulumi.*.yaml)
    known=("${known[@]#Pulumi.}")
    echo "lab: no Pulumi.$s.yaml for stack '$s'; the lab's stacks are: ${known[*]%.yaml}" >&2
    exit 2
  }
done
[ "$verb" != outputs ] || [ ${#stacks[@]} -le 1 ] || usage
bash scripts/bootstrap.sh
. scripts/toolenv.sh
[ "$(id -u)" -eq 0 ] || { echo "lab: network namespaces need root; run it as root" >&2; exit 1; }
npm run --silent build >&2
# The lab's Pulumi state lives beside the tool cache, not in the clone: `down` works from any clone.
export PULUMI_BACKEND_URL=${PULUMI_BACKEND_URL:-file://$PLB_CACHE/lab-state}
mkdir -p "${PULUMI_BACKEND_URL#file://}"
# Only the lab's own state is encrypted with it (no secrets unless you set loadBalancer.bgp.password).
export PULUMI_CONFIG_PASSPHRASE=${PULUMI_CONFIG_PASSPHRASE-portable-lb-lab}
export PULUMI_NODEJS_TRANSPILE_ONLY=true
case $verb in
down)
  # Default: every stack of the lab's backend, the newest first (a joined platform before the one
  # whose site it joined, though either order works).
  if [ ${#stacks[@]} -eq 0 ]; then
    mapfile -t stacks < <(pulumi stack ls --json | node -e '
      const all = JSON.parse(require("fs").readFileSync(0, "utf8"));
      all.sort((a, b) => (b.lastUpdate ?? "").localeCompare(a.lastUpdate ?? ""));
      for (const s of all) console.log(s.name);')
  fi
  for s in "${stacks[@]}"; do
    pulumi stack select --create "$s" >/dev/null
    pulumi destroy -s "$s" --yes --skip-preview
  done
  exit 0
  ;;
outputs)
  s=${stacks[0]:-lab}
  pulumi stack select --create "$s" >/dev/null
  pulumi stack output -s "$s" --json --show-secrets
  exit 0
  ;;
esac
[ ${#stacks[@]} -gt 0 ] || stacks=(lab)
# PLB_LAB_MODE=snat|dsr runs the lab with that data-plane mode, PLB_LAB_FASTPATH=auto|off with or
# without the DSR fast path (the benchmarks compare them), from a copy of the stack's settings,
# which themselves stay as they are.
config_file=$(mktemp --suffix=.yaml)
trap 'rm -f "$config_file"' EXIT
for s in "${stacks[@]}"; do
  pulumi stack select --create "$s" >/dev/null
  config_args=()
  if [ -n "${PLB_LAB_MODE:-}${PLB_LAB_FASTPATH:-}" ]; then
    case ${PLB_LAB_MODE:-dsr} in snat | dsr) ;; *)
      echo "lab: PLB_LAB_MODE is '$PLB_LAB_MODE'; set it to snat or dsr, or unset it for Pulumi.$s.yaml's" >&2
      exit 2
      ;;
    esac
    case ${PLB_LAB_FASTPATH:-auto} in auto | off) ;; *)
      echo "lab: PLB_LAB_FASTPATH is '$PLB_LAB_FASTPATH'; set it to auto or off, or unset it for Pulumi.$s.yaml's" >&2
      exit 2
      ;;
    esac
    mode=${PLB_LAB_MODE:-'\2'}
    fast=${PLB_LAB_FASTPATH:+"\n\1fastPath: $PLB_LAB_FASTPATH"}
    sed -E "s/^( +)mode: (dsr|snat)\$/\1mode: $mode$fast/" "Pulumi.$s.yaml" >"$config_file"
    grep -Eq "^ +mode: ${PLB_LAB_MODE:-(dsr|snat)}\$" "$config_file" || {
      echo "lab: no dataPlane mode line found in Pulumi.$s.yaml to set" >&2
      exit 1
    }
    config_args=(--config-file "$config_file")
  fi
  start=$SECONDS
  pulumi up -s "$s" --yes --skip-preview "${config_args[@]}"
  echo "lab: $s up in $((SECONDS - start)) s"
  pulumi stack output -s "$s" --json --show-secrets |
    node --disable-warning=MODULE_TYPELESS_PACKAGE_JSON packages/lab/src/reportMain.ts
done
