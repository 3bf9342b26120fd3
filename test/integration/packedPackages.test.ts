// The packages as a program outside this repository gets them: `npm run pack` writes their
// tarballs, a fresh project folder under the OS temp dir installs them with npm (their third-party
// dependencies from the registry or npm's cache), and the real app-stack example, copied there as a
// user copies it, previews through the real engine against the run's control plane, reading a
// stand-in platform stack's outputs through its StackReference. The engine type-checks the program,
// so the tarballs' type declarations are in use too.
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import type { EngineEvent } from "@pulumi/pulumi/automation/index.js";
import { VIP_POOL_ANNOTATION } from "@portable-lb/core";
import { testKubeconfig } from "../harness/testEnv.ts";
import { TestStack } from "../harness/testStack.ts";

const run = promisify(execFile);
const repo = join(__dirname, "..", "..");
const PACK_MS = 180_000;
const INSTALL_MS = 240_000;
const ENGINE_MS = 180_000;

// Children get none of the npm_* settings `npm run jest` put in our environment (its prefix, its
// workspace), so their npm acts as a user's in the consumer's folder.
const userEnv: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^(npm_|INIT_CWD$)/i.test(k)),
);

/** A platform's outputs, as a real platform stack exports them; the app must hand them on. */
const PLATFORM = {
  loadBalancerClass: "example.com/stand-in",
  vipPools: [{ name: "web", cidr: "10.1.1.0/28", avoidBuggyIps: false }],
};

describe("the packed packages, installed by a program outside the repository", () => {
  let work: string;
  let tarballs: string[];
  let consumer: string;
  let platform: TestStack | undefined;
  let app: TestStack | undefined;
  // Where the time goes, printed at the end (seconds).
  const took: Record<string, string> = {};
  const since = (start: number) => ((Date.now() - start) / 1000).toFixed(1);
  const started = Date.now();

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "plb-consumer-"));
    const packed = await run("npm", ["run", "--silent", "pack", "--", join(work, "packages")], {
      cwd: repo,
      env: userEnv,
      timeout: PACK_MS,
    });
    tarballs = packed.stdout.trim().split("\n");
    took.pack = since(started);
  }, PACK_MS);

  afterAll(async () => {
    await app?.dispose();
    await platform?.stack.destroy({ color: "never" }).catch(() => undefined);
    await platform?.dispose();
    if (work) await rm(work, { recursive: true, force: true });
    took.whole = since(started);
    console.log(`packed-packages test took (s): ${JSON.stringify(took)}`);
  }, ENGINE_MS);

  it("npm run pack writes core's and providers' versioned tarballs of built JavaScript and declarations", async () => {
    const version = async (p: string) =>
      (JSON.parse(await readFile(join(repo, "packages", p, "package.json"), "utf8")) as { version: string })
        .version;
    expect(tarballs).toEqual([
      join(work, "packages", `portable-lb-core-${await version("core")}.tgz`),
      join(work, "packages", `portable-lb-providers-${await version("providers")}.tgz`),
    ]);
    for (const tarball of tarballs) {
      const { stdout } = await run("tar", ["-tzf", tarball], { timeout: 30_000 });
      const files = stdout.trim().split("\n");
      expect(files).toEqual(expect.arrayContaining(["package/dist/index.js", "package/dist/index.d.ts"]));
      // Built output only: no TypeScript sources, tests or build state.
      const sources = files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"));
      expect([...sources, ...files.filter((f) => /\.test\.|tsbuildinfo/.test(f))]).toEqual([]);
    }
  });

  it(
    "installs into an empty folder with npm, and the app-stack example previews there from the installed packages",
    async () => {
      consumer = join(work, "shop");
      await mkdir(consumer);
      // The example as users copy it: its program and its project file, unchanged.
      for (const f of ["index.ts", "Pulumi.yaml"])
        await copyFile(join(repo, "examples", "app-stack", f), join(consumer, f));
      // The install examples/README.md gives, at the repository's versions of the third-party
      // packages (the kubernetes one must match the provider plugin the bootstrap built).
      const root = JSON.parse(await readFile(join(repo, "package.json"), "utf8")) as {
        dependencies: Record<string, string>;
        devDependencies: Record<string, string>;
      };
      const specs = [
        ...["@pulumi/pulumi", "@pulumi/kubernetes"].map((n) => `${n}@${root.dependencies[n]}`),
        ...["typescript", "ts-node", "@types/node"].map((n) => `${n}@${root.devDependencies[n]}`),
      ];
      // Strict, so a declaration missing from a tarball fails the engine's type check.
      await writeFile(
        join(consumer, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { strict: true, module: "nodenext", skipLibCheck: true } }),
      );
      const installStart = Date.now();
      await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", ...tarballs, ...specs], {
        cwd: consumer,
        env: userEnv,
        timeout: INSTALL_MS,
      });
      took.npmInstall = since(installStart);

      // The program's own require finds core in the folder's node_modules: a copy from the
      // tarball, not a link back to the repository, which is not above the folder either.
      expect(relative(repo, consumer).startsWith("..")).toBe(true);
      // Asked of a node of its own in that folder: Jest's resolver maps our packages to the sources.
      const resolved = await run(
        process.execPath,
        ["-p", 'require("fs").realpathSync(require.resolve("@portable-lb/core"))'],
        { cwd: consumer, env: userEnv, timeout: 30_000 },
      );
      const core = resolved.stdout.trim();
      expect(core).toBe(
        join(await realpath(consumer), "node_modules", "@portable-lb", "core", "dist", "index.js"),
      );
      // providers' dependency on core is that same core (no registry has another).
      const providers = join(consumer, "node_modules", "@portable-lb", "providers");
      expect(existsSync(join(providers, "dist", "index.js"))).toBe(true);
      expect(existsSync(join(providers, "node_modules", "@portable-lb", "core"))).toBe(false);

      const engineStart = Date.now();
      platform = await TestStack.create({
        program: join(repo, "test", "fixtures", "standInPlatform", "index.ts"),
        stackName: "standin-platform",
        config: {
          "portable-lb:loadBalancerClass": PLATFORM.loadBalancerClass,
          "portable-lb:vipPools": PLATFORM.vipPools,
        },
        secrets: { "portable-lb:kubeconfig": await readFile(testKubeconfig(), "utf8") },
      });
      const up = await platform.stack.up({ color: "never" });
      expect(up.summary.result).toBe("succeeded");

      app = await TestStack.create({
        program: consumer,
        inPlace: true,
        typeCheck: true,
        backendOf: platform,
        config: {
          "shop:platform": await platform.qualifiedName(),
          "shop:image": "registry.example.com/shop/web:1",
        },
      });
      const events: EngineEvent[] = [];
      await app.stack.preview({ color: "never", onEvent: (e) => events.push(e) });
      took.platformUpAndAppPreview = since(engineStart);

      const planned = events.flatMap((e) =>
        e.resourcePreEvent?.metadata.op === "create" ? [e.resourcePreEvent.metadata] : [],
      );
      const byType = (type: string) => planned.filter((m) => m.type === type);
      expect(planned.map((m) => m.type).sort()).toEqual(
        [
          "kubernetes:apps/v1:Deployment",
          "kubernetes:core/v1:Namespace",
          "kubernetes:core/v1:Service",
          "portable-lb:core:LoadBalancerService",
          "pulumi:providers:kubernetes",
          // The StackReference's provider.
          "pulumi:providers:pulumi",
          "pulumi:pulumi:Stack",
        ].sort(),
      );
      // The Service is the installed LoadBalancerService's child, with what the platform handed in.
      const service = byType("kubernetes:core/v1:Service")[0]!;
      expect(service.urn).toContain("portable-lb:core:LoadBalancerService$kubernetes:core/v1:Service::web");
      const inputs = service.new?.inputs as { metadata: { annotations: unknown }; spec: unknown };
      expect(inputs.spec).toEqual(
        expect.objectContaining({ type: "LoadBalancer", loadBalancerClass: PLATFORM.loadBalancerClass }),
      );
      expect(inputs.metadata.annotations).toEqual({ [VIP_POOL_ANNOTATION]: PLATFORM.vipPools[0]!.name });
      expect(byType("kubernetes:apps/v1:Deployment")[0]!.provider).toContain(
        "pulumi:providers:kubernetes::platform",
      );
    },
    INSTALL_MS + 2 * ENGINE_MS,
  );
});
