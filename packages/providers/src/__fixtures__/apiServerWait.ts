// The check every provisioned cluster's graph test makes: one ApiServerReady names every machine
// (so it is created after them) and asks the API server with the cluster's own kubeconfig.
import { secretValue, type RecordedResource } from "../../../../test/unit/pulumiMocks.ts";

/** Asserts the one wait names exactly `machineIds` and holds `kubeconfig` as a secret. */
export function expectApiServerWait(
  recorded: readonly RecordedResource[],
  machineIds: readonly string[],
  kubeconfig: string,
): void {
  const waits = recorded.filter((r) => r.type === "pulumi-nodejs:dynamic/providers:ApiServerReady");
  expect(waits).toHaveLength(1);
  const inputs = waits[0]!.inputs;
  expect([...(inputs.machines as string[])].sort()).toEqual([...machineIds].sort());
  expect(secretValue(inputs.kubeconfig)).toBe(kubeconfig);
  // The serialized provider loads the wait's module by path: no code of ours is in state.
  expect(inputs.__provider).toMatch(/waitForApiServer\.(ts|js)/);
}
