#!/usr/bin/env bash
# Builds the DSR fast path (README.md here): the tc BPF programs with clang, and the loader that
# embeds the LB pod's program. Used by the bootstrap (scripts/bootstrap/fastpath.sh, cached by a
# hash of this folder) and so by the image build.
#
#   lb-image/fastpath/build.sh OUT
#
# OUT/bin/portable-lb-fastpath  the loader (Go, static): the LB pods' dsr_lb.o, and with `node` the LB
#                               nodes' dsr_node.o (run by the node agent), both embedded
# OUT/lib/dsr_decap.o           the backend pods' decapsulation, attached by the node agent with tc
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1
clang=${CLANG:-clang-14}
mkdir -p "$out/bin" "$out/lib"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The Go module is built from a copy, so the object it embeds never lands in the source tree.
cp -r "$here/." "$work/"
bpf() { # SOURCE OUTPUT: BTF included (cilium/ebpf and tc's libbpf read the maps from it)
  "$clang" -O2 -g -Wall -Werror -target bpf -I/usr/include/x86_64-linux-gnu -c "$1" -o "$2"
}
bpf "$here/bpf/dsr_lb.c" "$work/dsr_lb.o"
bpf "$here/bpf/dsr_node.c" "$work/dsr_node.o"
bpf "$here/bpf/dsr_decap.c" "$out/lib/dsr_decap.o"
# The loader's Go tests (request checks, map diffs) run in every build, which the cache key ties to
# this folder's contents: a change cannot reach the image untested.
(cd "$work" && export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local &&
  go test -count=1 . && go build -trimpath -ldflags='-s -w' -o "$out/bin/portable-lb-fastpath" .)
