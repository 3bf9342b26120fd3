// The LB image's application for the IPVS guest, laid out as the image lays it out
// (lb-image/image/app.sh): /opt/portable-lb with this checkout's lb-image and packages/core builds,
// the production dependencies of those two (npm's own tree of them, less core's @pulumi/* ones, as
// app.sh prunes), node_modules/@portable-lb/core linking to packages/core, and each command of
// lb-image's package.json `bin` linked into /usr/local/bin. Type declarations, TypeScript sources
// and source maps stay out: Node never loads them (the pod runs without --enable-source-maps), and
// they are half of the ~240 MB.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { ImageConfig } from "../oci/ociArchive.ts";
import { repoRoot } from "../repoRoot.ts";

/** The image's application folder. */
export const GUEST_LB_APP_DIR = "/opt/portable-lb";

export interface GuestLbApp {
  /** Guest path -> host path. */
  files: Record<string, string>;
  /** Guest path -> link target. */
  symlinks: Record<string, string>;
  /** The image config's user and env, as build.sh gives them (`--user`, `--env`s). */
  imageConfig: ImageConfig;
}

interface NpmTree {
  path?: string;
  missing?: boolean;
  dependencies?: Record<string, NpmTree>;
}

const NOT_LOADED = /\.(d\.[cm]?ts|[cm]?ts|map|tsbuildinfo)$/;

/** The application's files; a clear error when the build is missing. */
export function guestLbApp(): GuestLbApp {
  const root = repoRoot();
  const lbImage = join(root, "lb-image");
  if (!existsSync(join(lbImage, "dist/main.js")))
    throw new Error("lb-image/dist/main.js is missing: run `npm run build` first (npm test does)");
  const files: Record<string, string> = {};
  const add = (from: string, guest: string, dir = from): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      // A package's own node_modules holds packages the tree lists on their own (or dev ones).
      if (e.isDirectory() && e.name !== "node_modules") add(from, guest, path);
      else if (e.isFile() && !NOT_LOADED.test(e.name)) files[join(guest, relative(from, path))] = path;
    }
  };
  const app = (...parts: string[]) => join(GUEST_LB_APP_DIR, ...parts);
  for (const [dir, parts] of [
    [lbImage, ["package.json", "dist", "bin"]],
    [join(root, "packages/core"), ["package.json", "dist"]],
  ] as const)
    for (const part of parts) {
      const host = join(dir, part);
      if (part === "package.json") files[app(relative(root, host))] = host;
      else add(host, app(relative(root, host)));
    }
  for (const pkg of productionPackages(root)) add(pkg, app(relative(root, pkg)));
  const bin = (
    JSON.parse(readFileSync(join(lbImage, "package.json"), "utf8")) as { bin: Record<string, string> }
  ).bin;
  const symlinks: Record<string, string> = {
    [app("node_modules/@portable-lb/core")]: "../../packages/core",
    ...Object.fromEntries(
      Object.entries(bin).map(([command, path]) => [`/usr/local/bin/${command}`, app("lb-image", path)]),
    ),
  };
  return { files, symlinks, imageConfig: imageConfig(join(lbImage, "image/build.sh")) };
}

/** The user and env build.sh gives the image's config. */
function imageConfig(buildScript: string): ImageConfig {
  const build = readFileSync(buildScript, "utf8");
  const vars = new Map([...build.matchAll(/^([A-Z_]+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  const user = /--user "([^"]+)"/.exec(build)?.[1]?.replace(/\$(\w+)/g, (_, name: string) => {
    const value = vars.get(name);
    if (value === undefined) throw new Error(`${buildScript}: --user names $${name}, which it does not set`);
    return value;
  });
  const env = [...build.matchAll(/--env ([A-Z_]+=\S+)/g)].map((m) => m[1]!);
  if (!user || !env.some((e) => e.startsWith("PATH=")))
    throw new Error(`${buildScript}: no --user or no --env PATH=... found for the image's config`);
  return { User: user, Env: env };
}

/** Folders of the packages lb-image needs at run time, from npm's tree (workspaces excluded). */
function productionPackages(root: string): string[] {
  const npm = spawnSync(
    "npm",
    ["ls", "--omit=dev", "--all", "--json", "--long", "--offline", "--workspace", "lb-image"],
    {
      cwd: root,
      encoding: "utf8",
      // npm beside the node running the tests; explicit env (Jest's process.env is a copy).
      env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}` },
      maxBuffer: 64 * 2 ** 20,
    },
  );
  if (npm.status !== 0)
    throw new Error(
      `npm ls (the LB image's dependencies) failed: ${npm.stderr.trim() || npm.error?.message}`,
    );
  const tree = JSON.parse(npm.stdout) as NpmTree;
  const packages = new Set<string>();
  const visit = (name: string, node: NpmTree): void => {
    // app.sh drops core's Pulumi dependencies: the image never loads the Pulumi components.
    if (name.startsWith("@pulumi/") || node.missing || !node.path || !existsSync(node.path)) return;
    // npm lists a package's dependencies at one of its places only ("deduped" at the others).
    packages.add(realpathSync(node.path));
    for (const [dep, child] of Object.entries(node.dependencies ?? {})) visit(dep, child);
  };
  for (const [name, node] of Object.entries(tree.dependencies ?? {})) visit(name, node);
  const nodeModules = join(root, "node_modules");
  return [...packages].filter((p) => p.startsWith(`${nodeModules}/`));
}
