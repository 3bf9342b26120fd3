// Writes the LB image's SBOM (sbom.ts) for its root filesystem to OUT and into the root filesystem
// at SBOM_PATH, and prints SBOM_PATH. Run by build.sh:
//
//   node lb-image/image/sbomMain.ts ROOTFS NODE_VERSION BIRD_VERSION SOURCE_DATE_EPOCH OUT GO_MODULES
//
// GO_MODULES: `go version -m` of the fast path's loader (its Go modules).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { SBOM_PATH, lbImageComponents, spdxDocument } from "./sbom.ts";

const [rootfs, nodeVersion, birdVersion, epoch, out, goModules] = process.argv.slice(2);
if (!rootfs || !nodeVersion || !birdVersion || !/^\d+$/.test(epoch ?? "") || !out || !goModules) {
  console.error(
    "usage: node lb-image/image/sbomMain.ts ROOTFS NODE_VERSION BIRD_VERSION SOURCE_DATE_EPOCH OUT GO_MODULES",
  );
  process.exit(2);
}
const components = lbImageComponents(rootfs, nodeVersion, birdVersion, readFileSync(goModules, "utf8"));
const text = `${JSON.stringify(spdxDocument("portable-lb-lb-image", components, Number(epoch)), null, 2)}\n`;
writeFileSync(out, text);
mkdirSync(dirname(join(rootfs, SBOM_PATH)), { recursive: true });
writeFileSync(join(rootfs, SBOM_PATH), text, { mode: 0o644 });
console.log(SBOM_PATH);
