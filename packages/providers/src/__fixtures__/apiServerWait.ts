// The check every provisioned environment's graph test makes: PortableCluster's objects wait for
// one ApiServerReady, which names every machine (so it is created after them) and asks the API
// server with the environment's own kubeconfig.
import { secretValue, valueOf, type RecordedResource } from "../../../../test/unit/pulumiMocks.ts";
import { ApiServerReady } from "../apiServer/apiServerReady.ts";
import type { ProvisionedEnvironment } from "../provider.ts";

export const API_SERVER_READY_TYPE = "pulumi-nodejs:dynamic/providers:ApiServerReady";

/** Asserts the environment waits for its API server on exactly `machineIds`; returns the wait's inputs. */
export async function expectApiServerWait(
  env: ProvisionedEnvironment,
  recorded: readonly RecordedResource[],
  machineIds: readonly string[],
): Promise<RecordedResource["inputs"]> {
  expect(env.dependsOn).toHaveLength(1);
  expect(env.dependsOn![0]).toBeInstanceOf(ApiServerReady);
  const waits = recorded.filter((r) => r.type === API_SERVER_READY_TYPE);
  expect(waits).toHaveLength(1);
  const inputs = waits[0]!.inputs;
  expect([...(inputs.machines as string[])].sort()).toEqual([...machineIds].sort());
  expect(secretValue(inputs.kubeconfig)).toBe(await valueOf(env.kubeconfig));
  // The serialized provider loads the wait's module by path: no code of ours is in state.
  expect(inputs.__provider).toMatch(/waitForApiServer\.(ts|js)/);
  return inputs;
}
