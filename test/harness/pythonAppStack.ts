// examples/python-app-stack deployed by the real engine (Automation API) against a platform stack:
// portable-lb's Python SDK generated and installed for it, the bootstrap's venv, the plugin run from
// this repository. For the lab's end-to-end test and the integration test against a stand-in.
import { join } from "node:path";
import type { DestroyOptions, OutputMap, UpOptions, UpResult } from "@pulumi/pulumi/automation/index.js";
import { installPythonSdk } from "./pythonSdk.ts";
import { pythonVenv } from "./pythonRuntime.ts";
import { repoRoot } from "./repoRoot.ts";
import { TestStack } from "./testStack.ts";

// Bounds the clean-up after a failed up (which the caller's own signal may have aborted).
const CLEANUP_MS = 5 * 60_000;

/** The example's project (its Pulumi.yaml), which namespaces its settings. */
export const PYTHON_APP_PROJECT = "shop-py";

export interface PythonAppStackOptions {
  /** The platform stack as a StackReference names it, e.g. "organization/portable-lb/lab". */
  platform: string;
  /** The platform's file backend (its state folder): the app stack is kept there too, to read it. */
  backendDir: string;
  /** The web server's image (the app's `image` setting). */
  image: string;
  /** The app's other settings (replicas, pool, vip, announce, handover), without the project prefix. */
  settings?: Record<string, unknown>;
  /** Default "python-app". */
  stackName?: string;
}

export interface PythonAppTestStack {
  stack: TestStack;
  /** Removes the stack (call after its destroy, if it made anything) and the SDK it was given. */
  dispose(): Promise<void>;
}

export interface PythonAppStack extends PythonAppTestStack {
  /** What `pulumi up` returned. */
  up: UpResult;
  /** The app's outputs: `vip` and `url`. */
  outputs: OutputMap;
  /** `pulumi destroy`, then dispose(). */
  destroy(opts?: DestroyOptions): Promise<void>;
}

/** The Python app's stack with its settings, not yet deployed. */
export async function createPythonAppStack(o: PythonAppStackOptions): Promise<PythonAppTestStack> {
  const venv = pythonVenv();
  const sdk = await installPythonSdk(venv);
  try {
    const stack = await TestStack.create({
      program: join(repoRoot(), "examples/python-app-stack"),
      projectName: PYTHON_APP_PROJECT,
      stackName: o.stackName ?? "python-app",
      python: { venv, pythonPath: [sdk.site], plugins: [{ name: "portable-lb", path: sdk.plugin }] },
      backendOf: { stateDir: o.backendDir },
      config: Object.fromEntries(
        Object.entries({ ...o.settings, platform: o.platform, image: o.image }).map(([k, v]) => [
          `${PYTHON_APP_PROJECT}:${k}`,
          v,
        ]),
      ),
    });
    return {
      stack,
      dispose: async () => {
        await stack.stack.workspace.removeStack(stack.stack.name).catch(() => undefined);
        await stack.dispose();
        await sdk.dispose();
      },
    };
  } catch (err) {
    await sdk.dispose();
    throw err;
  }
}

/**
 * `pulumi up` of the Python app stack. If the up fails, the stack is destroyed and removed before
 * the error is thrown; otherwise the caller calls destroy().
 */
export async function upPythonAppStack(
  o: PythonAppStackOptions,
  upOptions?: UpOptions,
): Promise<PythonAppStack> {
  const app = await createPythonAppStack(o);
  const destroy = async (opts?: DestroyOptions) => {
    try {
      await app.stack.stack.destroy(opts);
    } finally {
      await app.dispose();
    }
  };
  try {
    const up = await app.stack.stack.up(upOptions);
    return { ...app, up, outputs: up.outputs, destroy };
  } catch (err) {
    await destroy({ color: "never", signal: AbortSignal.timeout(CLEANUP_MS) }).catch(() => undefined);
    throw err;
  }
}
