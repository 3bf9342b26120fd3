# `npm run image -- --load SOCKET[,NAMESPACE]`: imports the image archive into a running containerd
# with Debian's ctr, under the name stored in the archive. NAMESPACE defaults to k8s.io, where the
# kubelet's CRI looks for images. Sourced by build.sh.

# load_image ARCHIVE REF SOCKET[,NAMESPACE]
load_image() {
  local socket=${3%%,*} namespace=k8s.io
  [[ $3 != *,* ]] || namespace=${3#*,}
  [ -S "$socket" ] || { echo "image: --load $3: $socket is not a socket (a running containerd's address)" >&2; return 1; }
  ctr --address "$socket" --namespace "$namespace" images import "$1" >&2
  # Read whole, not piped into grep -q: under pipefail, grep leaving early can fail ctr with SIGPIPE.
  local listed
  listed=$(ctr --address "$socket" --namespace "$namespace" images check --quiet "name==$2") || listed=
  [ -n "$listed" ] || {
    echo "image: --load: containerd at $socket lists no $2 after the import" >&2
    return 1
  }
  echo "image: loaded $2 into containerd $socket (namespace $namespace)" >&2
}
