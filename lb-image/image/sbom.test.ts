import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dpkgComponents, goComponents, npmComponents, spdxDocument } from "./sbom.ts";

const STATUS = `Package: iproute2
Status: install ok installed
Architecture: amd64
Version: 6.1.0-3

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libstdc++6
Status: install ok installed
Architecture: amd64
Source: gcc-12
Version: 12.2.0-14+deb12u1
`;

describe("the LB image's SBOM", () => {
  it("lists a Go binary's dependencies, replaced ones as replaced, not its own module", () => {
    const versionM = [
      "/usr/local/bin/portable-lb-fastpath: go1.26.8",
      "\tpath\tportable-lb/fastpath",
      "\tmod\tportable-lb/fastpath\t(devel)\t",
      "\tdep\tgithub.com/cilium/ebpf\tv0.22.0\th1:abc=",
      "\tdep\tgolang.org/x/sys\tv0.40.0\th1:def=",
      "\t=>\tgolang.org/x/sys\tv0.43.0\th1:ghi=",
      "\tbuild\tCGO_ENABLED=0",
    ].join("\n");
    expect(goComponents(versionM)).toEqual([
      {
        name: "github.com/cilium/ebpf",
        version: "v0.22.0",
        purl: "pkg:golang/github.com/cilium/ebpf@v0.22.0",
      },
      { name: "golang.org/x/sys", version: "v0.43.0", purl: "pkg:golang/golang.org/x/sys@v0.43.0" },
    ]);
  });

  it("lists the installed Debian packages only, with package URLs", () => {
    expect(dpkgComponents(STATUS)).toEqual([
      {
        name: "iproute2",
        version: "6.1.0-3",
        purl: "pkg:deb/debian/iproute2@6.1.0-3?arch=amd64&distro=debian-12",
      },
      {
        name: "libstdc++6",
        version: "12.2.0-14+deb12u1",
        purl: "pkg:deb/debian/libstdc++6@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-12",
      },
    ]);
  });

  it("lists every npm package, scoped and nested ones too", () => {
    const dir = mkdtempSync(join(tmpdir(), "plb-sbom-"));
    try {
      const pkg = (path: string, json: object) => {
        mkdirSync(join(dir, path), { recursive: true });
        writeFileSync(join(dir, path, "package.json"), JSON.stringify(json));
      };
      pkg("zod", { name: "zod", version: "4.1.0", license: "MIT" });
      pkg("@kubernetes/client-node", { name: "@kubernetes/client-node", version: "2.0.1" });
      pkg("@kubernetes/client-node/node_modules/ws", { name: "ws", version: "8.0.0" });
      mkdirSync(join(dir, ".bin"));
      expect(npmComponents(dir).sort((a, b) => a.purl.localeCompare(b.purl))).toEqual([
        {
          name: "@kubernetes/client-node",
          version: "2.0.1",
          purl: "pkg:npm/%40kubernetes/client-node@2.0.1",
        },
        { name: "ws", version: "8.0.0", purl: "pkg:npm/ws@8.0.0" },
        { name: "zod", version: "4.1.0", purl: "pkg:npm/zod@4.1.0", license: "MIT" },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is an SPDX 2.3 document that depends only on its components and time", () => {
    const components = dpkgComponents(STATUS);
    const doc = spdxDocument("img", components, 1_700_000_000) as Record<string, unknown>;
    expect(doc).toMatchObject({
      spdxVersion: "SPDX-2.3",
      SPDXID: "SPDXRef-DOCUMENT",
      creationInfo: { created: "2023-11-14T22:13:20Z" },
    });
    expect(spdxDocument("img", [...components].reverse(), 1_700_000_000)).toEqual(doc);
    expect(
      (spdxDocument("img", components.slice(1), 1_700_000_000) as Record<string, unknown>).documentNamespace,
    ).not.toBe(doc.documentNamespace);
    const packages = doc.packages as { SPDXID: string }[];
    expect(packages.map((p) => p.SPDXID)).toEqual([
      "SPDXRef-pkg-deb-debian-iproute2-6.1.0-3-arch-amd64-distro-debian-12",
      "SPDXRef-pkg-deb-debian-libstdc--6-12.2.0-14-2Bdeb12u1-arch-amd64-distro-debian-12",
    ]);
    expect(doc.relationships).toHaveLength(2);
  });
});
