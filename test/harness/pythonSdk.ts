// portable-lb's Python SDK for a test, made as a user makes it: scripts/python-sdk.sh generates it
// (the schema from the real plugin, the code from Pulumi's Python generator), then pip installs it,
// into a folder of the test's own (--target) so the bootstrap's shared venv stays as it is.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "./repoRoot.ts";

const run = promisify(execFile);
// The plugin's schema takes ~5 s on an idle machine (Node, then the TypeScript analysis of its types).
const GENERATE_TIMEOUT_MS = 120_000;

export interface PythonSdk {
  /** The generated SDK, as `pulumi package add` leaves it in a project's sdks/portable-lb. */
  source: string;
  /** Where it is installed: a folder for PYTHONPATH. */
  site: string;
  /** The folder with the plugin behind it (its pulumi-resource-portable-lb), for plugins.providers. */
  plugin: string;
  /** Removes both folders. */
  dispose(): Promise<void>;
}

export async function installPythonSdk(venv: string): Promise<PythonSdk> {
  const dir = await mkdtemp(join(tmpdir(), "plb-python-sdk-"));
  const source = join(dir, "portable-lb");
  const site = join(dir, "site");
  try {
    await run("bash", [join(repoRoot(), "scripts/python-sdk.sh"), source], { timeout: GENERATE_TIMEOUT_MS });
    // The venv has what the install needs (wheel) and what the SDK imports (parver): nothing is downloaded.
    await run(
      join(venv, "bin/pip"),
      [
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        site,
        source,
      ],
      { timeout: GENERATE_TIMEOUT_MS },
    );
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    const e = err as { stderr?: string; message: string };
    throw new Error(`making portable-lb's Python SDK failed: ${e.stderr?.trim() || e.message}`, {
      cause: err,
    });
  }
  return {
    source,
    site,
    plugin: join(repoRoot(), "packages/component-provider"),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}
