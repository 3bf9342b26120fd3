#!/usr/bin/env bash
# The README's main command. `npm run lab` sets up every tool on a fresh machine (as `npm test`
# does), brings the lab stack up (`pulumi up -s lab`, Pulumi.lab.yaml) and shows it working: the
# VIP, the router's ECMP route and the spread of 100 requests. A second run changes nothing and
# repairs what died. `npm run lab -- down` destroys the lab and everything it started;
# `npm run --silent lab -- outputs` prints the stack's outputs as JSON (what the lab benchmarks read).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
verb=${1:-up}
case $verb in up | down | outputs) ;; *)
  echo "usage: npm run lab [-- up|down|outputs]" >&2
  exit 2
  ;;
esac
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
pulumi stack select --create lab >/dev/null
case $verb in
down)
  pulumi destroy -s lab --yes --skip-preview
  exit 0
  ;;
outputs)
  pulumi stack output -s lab --json --show-secrets
  exit 0
  ;;
esac
# PLB_LAB_MODE=snat|dsr runs the lab with that data-plane mode, PLB_LAB_FASTPATH=auto|off with or
# without the DSR fast path (the benchmarks compare them), from a copy of Pulumi.lab.yaml, which
# itself stays as it is.
config_args=()
if [ -n "${PLB_LAB_MODE:-}${PLB_LAB_FASTPATH:-}" ]; then
  case ${PLB_LAB_MODE:-dsr} in snat | dsr) ;; *)
    echo "lab: PLB_LAB_MODE is '$PLB_LAB_MODE'; set it to snat or dsr, or unset it for Pulumi.lab.yaml's" >&2
    exit 2
    ;;
  esac
  case ${PLB_LAB_FASTPATH:-auto} in auto | off) ;; *)
    echo "lab: PLB_LAB_FASTPATH is '$PLB_LAB_FASTPATH'; set it to auto or off, or unset it for Pulumi.lab.yaml's" >&2
    exit 2
    ;;
  esac
  config_file=$(mktemp --suffix=.yaml)
  trap 'rm -f "$config_file"' EXIT
  mode=${PLB_LAB_MODE:-'\2'}
  fast=${PLB_LAB_FASTPATH:+"\n\1fastPath: $PLB_LAB_FASTPATH"}
  sed -E "s/^( +)mode: (dsr|snat)\$/\1mode: $mode$fast/" Pulumi.lab.yaml >"$config_file"
  grep -Eq "^ +mode: ${PLB_LAB_MODE:-(dsr|snat)}\$" "$config_file" || {
    echo "lab: no dataPlane mode line found in Pulumi.lab.yaml to set" >&2
    exit 1
  }
  config_args=(--config-file "$config_file")
fi
start=$SECONDS
pulumi up -s lab --yes --skip-preview "${config_args[@]}"
echo "lab: up in $((SECONDS - start)) s"
pulumi stack output -s lab --json --show-secrets |
  node --disable-warning=MODULE_TYPELESS_PACKAGE_JSON packages/lab/src/reportMain.ts
