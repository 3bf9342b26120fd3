// The root program deployed by the real Pulumi engine into the run's local kube-apiserver:
// up, then a preview that must change nothing, then destroy, checking the cluster after each step.
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { waitUntil } from "../harness/processes.ts";
import { TestStack } from "../harness/testStack.ts";
import { testKubeconfig } from "../harness/testEnv.ts";

const repoRoot = join(__dirname, "..", "..");

function coreApi(): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(testKubeconfig());
  return kc.makeApiClient(CoreV1Api);
}

async function namespaceExists(api: CoreV1Api, name: string): Promise<boolean> {
  try {
    await api.readNamespace({ name });
    return true;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return false;
    throw err;
  }
}

describe("root program on the local control plane", () => {
  let stack: TestStack;
  const api = coreApi();

  beforeAll(async () => {
    stack = await TestStack.create({
      program: repoRoot,
      config: { "portable-lb:environment": { kind: "kubeconfig", kubeconfig: testKubeconfig() } },
    });
  });
  afterAll(async () => {
    await stack?.dispose();
  });

  it("creates the system namespace on up", async () => {
    const up = await stack.stack.up({ color: "never" });
    expect(up.summary.result).toBe("succeeded");
    expect(up.summary.resourceChanges).toEqual({ create: 4 }); // stack, k8s provider, component, namespace
    expect(up.outputs.systemNamespace?.value).toBe("portable-lb-system");

    const ns = await api.readNamespace({ name: "portable-lb-system" });
    expect(ns.metadata?.labels).toMatchObject({
      "app.kubernetes.io/part-of": "portable-lb",
      "app.kubernetes.io/component": "platform",
      "pod-security.kubernetes.io/enforce": "privileged",
    });
  });

  it("previews no changes after up (no perpetual diff)", async () => {
    const preview = await stack.stack.preview({ color: "never" });
    expect(preview.changeSummary).toEqual({ same: 4 });
    expect(await namespaceExists(api, "portable-lb-system")).toBe(true);
  });

  it("removes the namespace on destroy", async () => {
    const destroy = await stack.stack.destroy({ color: "never" });
    expect(destroy.summary.result).toBe("succeeded");
    expect(destroy.summary.resourceChanges).toEqual({ delete: 4 });
    // The namespace controller finalizes deletion asynchronously; it must be gone within a bound.
    expect(
      await waitUntil(async () => !(await namespaceExists(api, "portable-lb-system")), 60_000, 250),
    ).toBe(true);
  });
});
