// A Pulumi stack for tests, driven by the real engine through the Automation API: a file backend and
// a project folder in a temp dir whose `main` points at the program under test, so the repo gets
// no Pulumi.<stack>.yaml and nothing is left behind after dispose().
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation/index.js";

export interface TestStackOptions {
  /** Folder of the Pulumi program (its index.ts) to run. */
  program: string;
  /** The program's project name, which namespaces its config (default "portable-lb"). */
  projectName?: string;
  /** Stack config: strings as they are, anything else as JSON (read back with getObject/getNumber). */
  config: Record<string, unknown>;
  /** Config keys stored encrypted, as `pulumi config set --secret` does. */
  secrets?: Record<string, string>;
  stackName?: string;
}

export class TestStack {
  readonly stack: Stack;
  private readonly dir: string;

  private constructor(stack: Stack, dir: string) {
    this.stack = stack;
    this.dir = dir;
  }

  static async create(opts: TestStackOptions): Promise<TestStack> {
    const dir = await mkdtemp(join(tmpdir(), "plb-stack-"));
    await writeFile(
      join(dir, "Pulumi.yaml"),
      `name: ${opts.projectName ?? "portable-lb"}\nruntime:\n  name: nodejs\n  options:\n    typescript: true\nmain: ${relative(dir, opts.program)}\n`,
    );
    const envVars: Record<string, string> = {
      PULUMI_BACKEND_URL: `file://${join(dir, "state")}`,
      PULUMI_CONFIG_PASSPHRASE: "portable-lb-test-only",
      // `npm test` type-checks everything first; the engine need not do it again.
      PULUMI_NODEJS_TRANSPILE_ONLY: "true",
    };
    await mkdir(join(dir, "state"));
    const stack = await LocalWorkspace.createOrSelectStack(
      { stackName: opts.stackName ?? "test", workDir: dir },
      { envVars, ...(process.env.PULUMI_HOME && { pulumiHome: process.env.PULUMI_HOME }) },
    );
    for (const [key, value] of Object.entries(opts.config)) {
      await stack.setConfig(key, { value: typeof value === "string" ? value : JSON.stringify(value) });
    }
    for (const [key, value] of Object.entries(opts.secrets ?? {})) {
      await stack.setConfig(key, { value, secret: true });
    }
    return new TestStack(stack, dir);
  }

  /** Removes the stack's state and the temp folder; call after destroy(). */
  async dispose(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
