// A Pulumi stack for tests, driven by the real engine through the Automation API: a file backend and
// a project folder in a temp dir whose `main` points at the program under test, so the repo gets
// no Pulumi.<stack>.yaml and nothing is left behind after dispose(). (Or, `inPlace`, a project
// folder of the test's own, laid out as a user's outside the repository.)
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { LocalWorkspace, type Stack } from "@pulumi/pulumi/automation/index.js";
import { pythonEnv, pythonRuntimeYaml, type PythonRuntime } from "./pythonRuntime.ts";

export interface TestStackOptions {
  /** The Pulumi program to run: its index.ts (or, with `python`, its folder with __main__.py). */
  program: string;
  /** Run `program` as a Python program, in this venv with these plugins (default: TypeScript). */
  python?: PythonRuntime;
  /** The program's project name, which namespaces its config (default "portable-lb"). */
  projectName?: string;
  /** Stack config: strings as they are, anything else as JSON (read back with getObject/getNumber). */
  config: Record<string, unknown>;
  /** Config keys stored encrypted, as `pulumi config set --secret` does. */
  secrets?: Record<string, string>;
  stackName?: string;
  /**
   * Another test stack whose backend this one shares, so it can read that stack's outputs through a
   * StackReference (`organization/<its project>/<its stack>`), as an app stack reads its platform's.
   */
  backendOf?: Pick<TestStack, "stateDir">;
  /**
   * Run `program` where it is: its folder is a whole project (its Pulumi.yaml, package.json and
   * node_modules), as a user's is. dispose() then removes only what the stack put there.
   */
  inPlace?: boolean;
  /**
   * Let the engine type-check the program (ts-node), as it does for users. Off by default: `npm
   * test` type-checks the repository's programs before any test runs.
   */
  typeCheck?: boolean;
}

const NODEJS_RUNTIME = "runtime:\n  name: nodejs\n  options:\n    typescript: true\n";

export class TestStack {
  readonly stack: Stack;
  /** The state folder of its file backend. */
  readonly stateDir: string;
  /** What dispose() removes. */
  private readonly made: string[];

  private constructor(stack: Stack, stateDir: string, made: string[]) {
    this.stack = stack;
    this.stateDir = stateDir;
    this.made = made;
  }

  /** Its fully qualified name, as another stack of its backend names it in a StackReference. */
  async qualifiedName(): Promise<string> {
    const project = (await this.stack.workspace.projectSettings()).name;
    return `organization/${project}/${this.stack.name}`;
  }

  static async create(opts: TestStackOptions): Promise<TestStack> {
    // Pulumi's Node host runs a folder by the nearest package.json's main, so a program folder of
    // the repository without one silently runs the repository's root program instead.
    if (
      !opts.python &&
      (await stat(opts.program)).isDirectory() &&
      !existsSync(join(opts.program, "package.json"))
    )
      throw new Error(
        `TestStack: program ${opts.program} is a folder without a package.json; pass its index.ts`,
      );
    const dir = opts.inPlace ? opts.program : await mkdtemp(join(tmpdir(), "plb-stack-"));
    if (!opts.inPlace)
      await writeFile(
        join(dir, "Pulumi.yaml"),
        `name: ${opts.projectName ?? "portable-lb"}\n${opts.python ? pythonRuntimeYaml(opts.python) : NODEJS_RUNTIME}main: ${relative(dir, opts.program)}\n`,
      );
    const stateDir = opts.backendOf?.stateDir ?? join(dir, "state");
    const stackName = opts.stackName ?? "test";
    const made = opts.inPlace
      ? [join(dir, `Pulumi.${stackName}.yaml`), ...(opts.backendOf ? [] : [stateDir])]
      : [dir];
    const envVars: Record<string, string> = {
      PULUMI_BACKEND_URL: `file://${stateDir}`,
      PULUMI_CONFIG_PASSPHRASE: "portable-lb-test-only",
      // Explicit either way, so a PULUMI_NODEJS_TRANSPILE_ONLY of the caller's cannot decide it.
      PULUMI_NODEJS_TRANSPILE_ONLY: opts.typeCheck ? "false" : "true",
      ...(opts.python && pythonEnv(opts.python)),
    };
    await mkdir(stateDir, { recursive: true });
    const stack = await LocalWorkspace.createOrSelectStack(
      { stackName, workDir: dir },
      { envVars, ...(process.env.PULUMI_HOME && { pulumiHome: process.env.PULUMI_HOME }) },
    );
    for (const [key, value] of Object.entries(opts.config)) {
      await stack.setConfig(key, { value: typeof value === "string" ? value : JSON.stringify(value) });
    }
    for (const [key, value] of Object.entries(opts.secrets ?? {})) {
      await stack.setConfig(key, { value, secret: true });
    }
    return new TestStack(stack, stateDir, made);
  }

  /** Removes the stack's state and its temp folder (in place: its settings file); call after destroy(). */
  async dispose(): Promise<void> {
    for (const path of this.made) await rm(path, { recursive: true, force: true });
  }
}

/**
 * The error lines of a failed engine run (a CommandError holds the whole of Pulumi's output): what
 * a CI log, which keeps only the head and tail of a long output, must still show.
 */
export function pulumiErrors(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const lines = text.split("\n").filter((l) => /\berror\b|failed/i.test(l) && !/^\s*stderr:/.test(l));
  return [...new Set(lines.map((l) => l.trim()))].slice(0, 30).join("\n") || text.slice(0, 2_000);
}
