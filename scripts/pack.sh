#!/usr/bin/env bash
# `npm run pack [-- FOLDER]`: the packages a Pulumi program outside this repository installs, as
# versioned npm tarballs in FOLDER (default dist-packages/): @portable-lb/core and
# @portable-lb/providers, their built JavaScript and type declarations. No registry publishes them;
# a program installs them by path (examples/README.md). @portable-lb/lab is left out: it runs this
# checkout's own tool builds and images, so only the repository's own lab program can use it.
# Prints the tarballs' paths, one a line.
set -euo pipefail
# npm runs scripts from the repository's root; a relative FOLDER is taken from where npm was called.
dest=${1:-dist-packages}
[[ $dest == /* ]] || dest=${INIT_CWD:-$PWD}/$dest
dest=$(realpath -m -- "$dest")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
packages=(packages/core packages/providers)

[ -x node_modules/.bin/tsc ] || {
  echo "pack: node_modules/.bin/tsc is missing; run npm install (or npm run bootstrap) in $PWD first" >&2
  exit 1
}
node_modules/.bin/tsc -b "${packages[@]}"

# Each one's dependency on another of ours must pin the version packed beside it, as the workspace
# does: npm then takes that tarball, where a version it lacks would send npm to the registry,
# which has none of ours.
# shellcheck disable=SC2016 # JavaScript, not shell
node -e '
  const read = (dir) => JSON.parse(require("fs").readFileSync(`${dir}/package.json`, "utf8"));
  const packed = new Map(process.argv.slice(1).map((dir) => [read(dir).name, read(dir)]));
  const problems = [...packed.values()].flatMap((pkg) =>
    Object.entries(pkg.dependencies ?? {})
      .filter(([name]) => name.startsWith("@portable-lb/"))
      .flatMap(([name, range]) => {
        const sibling = packed.get(name);
        if (!sibling) return [`${pkg.name}: depends on ${name}, which is not packed; add its folder to packages in scripts/pack.sh`];
        if (range !== sibling.version)
          return [`${pkg.name}: dependencies["${name}"] is "${range}", but ${name} is ${sibling.version}; set it to "${sibling.version}"`];
        return [];
      }),
  );
  if (problems.length) {
    console.error(problems.map((p) => `pack: ${p}`).join("\n"));
    process.exit(1);
  }
' "${packages[@]}"

mkdir -p "$dest"
# Only the tarballs of earlier packs go: FOLDER may hold other files of its owner's.
rm -f "$dest"/portable-lb-*.tgz
workspaces=("${packages[@]/#/--workspace=}")
# shellcheck disable=SC2016 # JavaScript, not shell
npm pack --json --pack-destination "$dest" "${workspaces[@]}" |
  node -e 'for (const t of JSON.parse(require("fs").readFileSync(0, "utf8"))) console.log(`${process.argv[1]}/${t.filename}`)' "$dest"
