// The Dockerfile cannot be built here (no container engine), so it is checked against the code: every
// command the manifests run is a launcher the image links or a tool of a package it installs, every
// launcher loads an entry that exists, and the modules the entries load are all in the pruned image.
import { accessSync, constants, existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { LB_COMMANDS, lbConfigSchema } from "@portable-lb/core/config";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { nodeAgentPodSpec } from "../../packages/core/src/loadBalancer/nodeAgent.ts";

/** The command-line tools the LB image's processes and probes run, and the Debian packages shipping them. */
const TOOL_PACKAGES: Record<string, string> = {
  ipvsadm: "ipvsadm",
  nft: "nftables",
  ip: "iproute2",
  bird: "bird2",
  birdc: "bird2",
  birdcl: "bird2",
};
const LB_IMAGE = join(__dirname, "..");
const REPO = join(LB_IMAGE, "..");
const CORE = join(REPO, "packages/core");
const dockerfile = readFileSync(join(LB_IMAGE, "Dockerfile"), "utf8");

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

/** The packages `apt-get install` names in the runtime stage (the one FROM without a stage name). */
function installedPackages(): string[] {
  const runtime = dockerfile.slice(
    Math.max(0, dockerfile.search(/^FROM debian:\$\{DEBIAN_RELEASE\}-slim$/m)),
  );
  const line = /apt-get install -y --no-install-recommends ([^\\\n]+)/.exec(runtime)?.[1] ?? "";
  return line.trim().split(/\s+/);
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

describe("lb-image/Dockerfile", () => {
  it.each(commands)("links %s into /usr/local/bin", (command) => {
    expect(dockerfile).toContain(`ln -s /opt/portable-lb/lb-image/bin/${command} /usr/local/bin/${command}`);
  });

  it("builds on the Node version the tests run (scripts/versions.env) and runs on Debian slim", () => {
    const versions = readFileSync(join(REPO, "scripts/versions.env"), "utf8");
    const node = /^NODE_VERSION=(\S+)$/m.exec(versions)?.[1];
    expect(dockerfile).toMatch(new RegExp(`^ARG NODE_VERSION=${node}$`, "m"));
    expect(dockerfile).toMatch(/^FROM node:\$\{NODE_VERSION\}-\$\{DEBIAN_RELEASE\}-slim AS build$/m);
    expect(dockerfile).toMatch(/^FROM debian:\$\{DEBIAN_RELEASE\}-slim$/m);
    expect(dockerfile).toContain("COPY --from=build /usr/local/bin/node /usr/local/bin/node");
  });

  it("replaces Debian's BIRD with the build the tests run (lb-image/bird/build.sh)", () => {
    const bootstrap = readFileSync(join(REPO, "scripts/bootstrap/bird.sh"), "utf8");
    expect(bootstrap).toContain('"$REPO_ROOT/lb-image/bird/build.sh" /usr "$1"');
    expect(dockerfile).toMatch(/^FROM debian:\$\{DEBIAN_RELEASE\}-slim AS bird$/m);
    expect(dockerfile).toContain("RUN /src/lb-image/bird/build.sh /usr /out");
    expect(dockerfile).toContain(
      "COPY --from=bird /out/usr/sbin/bird /out/usr/sbin/birdc /out/usr/sbin/birdcl /usr/sbin/",
    );
    // The copy lands after the apt layer that installs bird2, or Debian's binaries would win.
    expect(dockerfile.indexOf("COPY --from=bird")).toBeGreaterThan(dockerfile.indexOf("iproute2 bird2"));
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

  it("installs the Debian package of every tool the code runs", () => {
    const sources = readdirSync(join(LB_IMAGE, "src"), { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && !f.split("/").includes("testing"))
      .map((f) => readFileSync(join(LB_IMAGE, "src", f), "utf8"))
      .join("\n");
    // Each tool appears as a string literal where it is run (withPrefix(prefix, "nft"), run(["bird", …])).
    const unused = Object.keys(TOOL_PACKAGES).filter((tool) => !new RegExp(`["']${tool}["']`).test(sources));
    expect(unused).toEqual([]);
    expect(installedPackages()).toEqual(expect.arrayContaining([...new Set(Object.values(TOOL_PACKAGES))]));
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
    // The Dockerfile removes core's Pulumi dependencies by name before pruning: all of them.
    const corePulumi = Object.keys(corePackage.dependencies ?? {}).filter((d) => d.startsWith("@pulumi/"));
    const deleted = /npm pkg delete ('dependencies\.[^\\]+) --workspace packages\/core/.exec(dockerfile)?.[1];
    expect(deleted?.split(/\s+/).sort()).toEqual(corePulumi.map((d) => `'dependencies.${d}'`).sort());
  });
});
