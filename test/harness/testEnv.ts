// How integration tests find the run's shared control plane.
import { KubeConfig } from "@kubernetes/client-node";
import type { ControlPlaneState } from "@portable-lb/lab";

export const TEST_ENV = {
  kubeconfig: "PORTABLE_LB_TEST_KUBECONFIG",
  server: "PORTABLE_LB_TEST_SERVER",
} as const;

export type SharedControlPlane = typeof globalThis & { __portableLbControlPlane?: ControlPlaneState };

/** The kubeconfig path of the run's control plane; fails clearly outside the integration project. */
export function testKubeconfig(): string {
  const path = process.env[TEST_ENV.kubeconfig];
  if (!path)
    throw new Error(
      `${TEST_ENV.kubeconfig} is not set: run integration tests through Jest's integration project`,
    );
  return path;
}

/** The run's admin KubeConfig; with `server`, pointed there instead (a proxy the test can cut). */
export function testKubeConfig(server?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(testKubeconfig());
  if (server) kc.clusters = kc.clusters.map((c) => ({ ...c, server }));
  return kc;
}
