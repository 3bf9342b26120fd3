// The LB image's build definition (lb-image/image) checked against the code: every command the
// manifests run is a launcher the image links or a tool the image carries, every launcher loads an
// entry that exists, and the modules the entries load are all in the pruned image. The image as
// built is checked by test/integration/lbImage.test.ts.
import { accessSync, constants, existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { LB_COMMANDS, LB_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { nodeAgentPodSpec } from "../../packages/core/src/loadBalancer/nodeAgent.ts";

/** Our BIRD build (lb-image/bird/build.sh), which the image carries instead of a Debian package. */
const BIRD_BUILD = "lb-image/bird/build.sh";
/** Debian packages marked Essential, which every Debian rootfs (the image's too) has. */
const ESSENTIAL = new Set(["util-linux", "coreutils"]);
/** The command-line tools the LB image's processes and probes run, and the Debian packages shipping them. */
const TOOL_PACKAGES: Record<string, string> = {
  ipvsadm: "ipvsadm",
  nft: "nftables",
  ip: "iproute2",
  conntrack: "conntrack",
  bird: BIRD_BUILD,
  birdc: BIRD_BUILD,
  // The node agent enters DSR backend pods' network namespaces and writes their sysctls.
  nsenter: "util-linux",
  tee: "coreutils",
  // It attaches the DSR fast path's decapsulation in backend pods (Debian's tc is built with libbpf).
  tc: "iproute2",
  // It loads that object once in a throwaway network namespace, to learn its tag.
  unshare: "util-linux",
};
const LB_IMAGE = join(__dirname, "..");
const REPO = join(LB_IMAGE, "..");
const CORE = join(REPO, "packages/core");
const IMAGE_BUILD = join(LB_IMAGE, "image");
const imageBuild = readFileSync(join(IMAGE_BUILD, "build.sh"), "utf8");

interface PackageJson {
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  exports?: Record<string, { default: string }>;
}
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8")) as PackageJson;
const lbImagePackage = readJson(join(LB_IMAGE, "package.json"));
const corePackage = readJson(join(CORE, "package.json"));
const commands = Object.values(LB_COMMANDS);

/** The source entry a launcher loads: `require("../dist/x/main.js")` → src/x/main.ts. */
function launcherEntry(command: string): string | undefined {
  const loaded = /^require\("\.\.\/dist\/(.+)\.js"\);$/m.exec(
    readFileSync(join(LB_IMAGE, "bin", command), "utf8"),
  );
  return loaded ? join(LB_IMAGE, "src", `${loaded[1]}.ts`) : undefined;
}

/** The Debian packages the image installs beside the essential set (lb-image/image/debian-packages). */
function installedPackages(): string[] {
  return readFileSync(join(IMAGE_BUILD, "debian-packages"), "utf8")
    .split("\n")
    .filter((line) => line && !line.startsWith("#"));
}

// ---- The modules an entry point loads at run time ----------------------------------------------

// `import`/`export … from` statements, with `type` when the whole statement is erased.
const IMPORT = /^(?:import|export)\s+(type\s+)?(?:[^;"']*?\sfrom\s+)?["']([^"']+)["']/gm;

function packageName(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
}

/** Where a workspace import lands: core's package.json `exports`, mapped from dist/*.js back to src/*.ts. */
function workspaceSource(specifier: string): string {
  const subpath = "." + specifier.slice("@portable-lb/core".length);
  const target = corePackage.exports?.[subpath]?.default;
  if (!target) throw new Error(`${specifier}: packages/core/package.json exports no "${subpath}"`);
  return join(CORE, target.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"));
}

/** Every source file reached from `entries` and every npm package imported, per importing workspace. */
function runtimeImports(entries: string[]): { files: Set<string>; packages: Map<string, Set<string>> } {
  const files = new Set<string>();
  const packages = new Map<string, Set<string>>(); // package -> files importing it
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const [, typeOnly, specifier] of readFileSync(file, "utf8").matchAll(IMPORT)) {
      if (typeOnly || specifier!.startsWith("node:")) continue;
      if (specifier!.startsWith(".")) visit(resolve(dirname(file), specifier!));
      else if (specifier!.startsWith("@portable-lb/core")) visit(workspaceSource(specifier!));
      else {
        const name = packageName(specifier!);
        packages.set(name, (packages.get(name) ?? new Set()).add(relative(REPO, file)));
      }
    }
  };
  entries.forEach(visit);
  return { files, packages };
}

// ---- Tests ----------------------------------------------------------------------------------------

describe("lb-image launchers (bin/)", () => {
  it.each(commands)("%s is an executable Node launcher of a source entry that exists", (command) => {
    const launcher = join(LB_IMAGE, "bin", command);
    accessSync(launcher, constants.X_OK);
    expect(readFileSync(launcher, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node");
    const entry = launcherEntry(command);
    expect(entry && relative(LB_IMAGE, entry)).toMatch(/^src\/.+\.ts$/);
    expect(existsSync(entry!)).toBe(true);
  });

  it("are exactly the LB commands, each declared in package.json `bin`", () => {
    expect(readdirSync(join(LB_IMAGE, "bin")).sort()).toEqual([...commands].sort());
    expect(lbImagePackage.bin).toEqual(Object.fromEntries(commands.map((c) => [c, `bin/${c}`])));
  });
});

describe("lb-image/image (the build definition)", () => {
  it("links every command of package.json `bin` into /usr/local/bin", () => {
    expect(imageBuild).toContain(`Object.keys(require(process.argv[1]).bin)`);
    expect(imageBuild).toContain(`ln -s "/opt/portable-lb/lb-image/bin/$cmd" "$rootfs/usr/local/bin/$cmd"`);
  });

  it("carries the Node and the BIRD the tests run (the tool cache's builds of scripts/versions.env)", () => {
    expect(imageBuild).toContain(
      `install -m 755 "$(tool_dir node "$NODE_VERSION")/bin/node" "$rootfs/usr/local/bin/node"`,
    );
    expect(imageBuild).toContain(
      `"$(tool_dir bird "$BIRD_TOOL_VERSION")"/usr/sbin/{bird,birdc} "$rootfs/usr/sbin/"`,
    );
    const bootstrap = readFileSync(join(REPO, "scripts/bootstrap/bird.sh"), "utf8");
    expect(bootstrap).toContain('"$REPO_ROOT/lb-image/bird/build.sh" /usr "$1"');
    // Installed after the Debian packages, whose files would otherwise win.
    expect(imageBuild.indexOf("/usr/sbin/{bird,birdc}")).toBeGreaterThan(
      imageBuild.indexOf("debian_rootfs "),
    );
  });

  it("carries the fast path the tests run, where the controller and the node agent look for it", () => {
    const bootstrap = readFileSync(join(REPO, "scripts/bootstrap/fastpath.sh"), "utf8");
    expect(bootstrap).toContain('"$REPO_ROOT/lb-image/fastpath/build.sh" "$1"');
    expect(imageBuild).toContain('fastpath=$(tool_dir fastpath "$FASTPATH_TOOL_VERSION")');
    // On PATH (the controller runs it by name), and the object at the path the node agent is given.
    expect(imageBuild).toContain(
      'install -m 755 "$fastpath/bin/portable-lb-fastpath" "$rootfs/usr/local/bin/"',
    );
    expect(imageBuild).toContain(`"$fastpath/lib/dsr_decap.o" "$rootfs${LB_PATHS.dsrDecapObject}"`);
  });

  it("applies every BIRD patch in lb-image/bird, and only those", () => {
    const build = readFileSync(join(LB_IMAGE, "bird/build.sh"), "utf8");
    const applied = /^for p in ([\w -]+); do patch -p1/m.exec(build)?.[1]?.split(" ");
    const patches = readdirSync(join(LB_IMAGE, "bird"))
      .filter((f) => f.endsWith(".patch"))
      .map((f) => f.replace(/\.patch$/, ""));
    expect(applied?.sort()).toEqual(patches.sort());
    // The build script names what each patch is for.
    for (const p of patches) expect(build).toContain(`#   ${p}.patch`);
  });

  it("installs the Debian package of every tool the code runs, and no Debian BIRD", () => {
    const sources = readdirSync(join(LB_IMAGE, "src"), { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.split("/").includes("testing"))
      .map((f) => readFileSync(join(LB_IMAGE, "src", f), "utf8"))
      .join("\n");
    // Each tool appears as a string literal where it is run (withPrefix(prefix, "nft"), run(["bird", …])).
    const unused = Object.keys(TOOL_PACKAGES).filter((tool) => !new RegExp(`["']${tool}["']`).test(sources));
    expect(unused).toEqual([]);
    const debian = Object.values(TOOL_PACKAGES).filter((p) => p !== BIRD_BUILD && !ESSENTIAL.has(p));
    expect(installedPackages()).toEqual(expect.arrayContaining([...new Set(debian)]));
    expect(installedPackages().filter((p) => p.startsWith("bird"))).toEqual([]);
  });

  it("has every command the manifests run (containers, probes, preStop hooks)", () => {
    const config = lbConfigSchema.parse({
      routingMode: "bgp",
      podCidr: "10.244.0.0/16",
      vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
      bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
    });
    const specs = [
      lbPodSpec({
        config,
        image: "lb",
        serviceAccountName: "sa",
        priorityClassName: "pc",
        nodeSelector: {},
        bgpPasswordSecret: "pw",
        configMapName: "cm",
      }),
      nodeAgentPodSpec({
        namespace: "ns",
        config,
        configMapName: "cm",
        podAnnotations: {},
        image: "lb",
        nodeSelector: {},
        priorityClassName: "pc",
      }),
    ];
    // Everything that names a program to run: command, exec probes, exec lifecycle hooks.
    const run = new Set<string>();
    const collect = (value: unknown, key = ""): void => {
      if (Array.isArray(value)) {
        if (key === "command" && typeof value[0] === "string") run.add(value[0]);
        else value.forEach((v) => collect(v));
      } else if (value && typeof value === "object")
        for (const [k, v] of Object.entries(value)) collect(v, k);
    };
    specs.forEach((s) => collect(s));
    expect([...run].filter((c) => !commands.includes(c as never) && !(c in TOOL_PACKAGES))).toEqual([]);
    expect([...run]).toEqual(expect.arrayContaining(commands));
  });

  it("keeps every package the entries load, and no Pulumi (pruned from the image)", () => {
    const entries = commands.map((c) => launcherEntry(c)!);
    const { files, packages } = runtimeImports(entries);
    expect(files.size).toBeGreaterThan(entries.length);
    const pulumi = [...packages.keys()].filter((p) => p.startsWith("@pulumi/"));
    expect(pulumi.map((p) => `${p} (imported by ${[...packages.get(p)!].join(", ")})`)).toEqual([]);
    // The image has lb-image's and core's dependencies only; each import must be declared by its own
    // workspace (hoisting would hide a missing one here and break it elsewhere).
    const undeclared = [...packages].flatMap(([name, importers]) =>
      [...importers]
        .filter((f) => {
          const owner = f.startsWith("packages/core/") ? corePackage : lbImagePackage;
          return !owner.dependencies?.[name];
        })
        .map((f) => `${name} in ${f}`),
    );
    expect(undeclared).toEqual([]);
  });
});
