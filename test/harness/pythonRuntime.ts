// How a test stack runs a Python program: the project file's runtime and plugin sections, and the
// environment the engine hands to the Python language host.
import { existsSync } from "node:fs";
import { join } from "node:path";

export interface PythonRuntime {
  /** The venv the program runs in (pythonVenv(): the bootstrap's, with Pulumi's Python SDKs). */
  venv: string;
  /** Folders of packages installed for this program alone (pip --target), searched before the venv. */
  pythonPath?: string[];
  /** Provider plugins run from a folder (its pulumi-resource-<name>), not from the plugin cache. */
  plugins?: { name: string; path: string }[];
}

/** The bootstrap's venv (scripts/bootstrap/python.sh, PORTABLE_LB_PYTHON_VENV from scripts/toolenv.sh). */
export function pythonVenv(): string {
  const venv = process.env.PORTABLE_LB_PYTHON_VENV ?? "";
  if (!existsSync(join(venv, "bin/python")))
    throw new Error(
      `no Python venv at PORTABLE_LB_PYTHON_VENV (${JSON.stringify(venv)}): run scripts/bootstrap.sh, then the tests through scripts/with-tools (npm test does both)`,
    );
  return venv;
}

export function pythonRuntimeYaml(r: PythonRuntime): string {
  const plugins = (r.plugins ?? []).map((p) => `    - name: ${p.name}\n      path: ${p.path}\n`).join("");
  return (
    `runtime:\n  name: python\n  options:\n    virtualenv: ${r.venv}\n` +
    (plugins && `plugins:\n  providers:\n${plugins}`)
  );
}

export function pythonEnv(r: PythonRuntime): Record<string, string> {
  return {
    // The pinned Python language host (3.68.0) takes the virtualenv option only as a flag, which
    // this CLI no longer passes; it runs the Python that PULUMI_PYTHON_CMD names.
    PULUMI_PYTHON_CMD: join(r.venv, "bin/python"),
    ...(r.pythonPath?.length && { PYTHONPATH: r.pythonPath.join(":") }),
  };
}
