# `npm run image -- --push REF`: copies the image archive to a registry with skopeo, digests kept
# (the registry stores the manifest we built, byte for byte). Credentials are skopeo's own: its auth
# file ($REGISTRY_AUTH_FILE, else ${XDG_RUNTIME_DIR}/containers/auth.json or ~/.docker/config.json,
# as `skopeo login` or `docker login` write them); nothing here reads or prints them. Sourced by
# build.sh.

# push_image ARCHIVE REF INSECURE(true|false)
push_image() {
  local work rc=0
  work=$(mktemp -d)
  # Any image may be pushed: the policy only governs what is pulled into this machine.
  printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$work/policy.json"
  # privateVarLib.sh: skopeo's blob-info cache would otherwise land in the host's /var/lib/containers.
  "$repo/scripts/image/privateVarLib.sh" skopeo --policy "$work/policy.json" --tmpdir "$work" copy --quiet --preserve-digests \
    --dest-tls-verify="$([ "$3" = true ] && echo false || echo true)" \
    "oci-archive:$1" "docker://$2" >&2 || rc=$?
  rm -rf "$work"
  [ $rc -eq 0 ] || { echo "image: push to $2 failed (above); log in with 'skopeo login ${2%%/*}' if it needs credentials" >&2; return 1; }
  echo "image: pushed $2" >&2
}
