// One control plane per Jest run, shared by every integration test through KUBECONFIG-style env vars.
import { mkdtemp } from "node:fs/promises";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  instancesRoot,
  isLabId,
  killControlPlaneNow,
  labsRoot,
  reapStale,
  reapStaleLabs,
  reapStaleNodeCgroups,
  startControlPlane,
} from "@portable-lb/lab";
import { TEST_ENV, type SharedControlPlane } from "./testEnv.ts";

export default async function globalSetup(): Promise<void> {
  // The integration and e2e projects both name this setup; a run of both shares one control plane.
  if ((globalThis as SharedControlPlane).__portableLbControlPlane) return;
  const root = instancesRoot();
  mkdirSync(root, { recursive: true });
  // What a killed earlier run left: control planes, network-namespace labs, and the pods of their
  // real nodes (in their own pod namespaces, under the nodes' cgroups).
  // A cgroup root whose scope is no lab id of ours belongs to a lab this code did not start (an
  // engineer's lab from another checkout on a shared machine): never ours to reap.
  const labLive = (id: string) => !isLabId(id) || existsSync(join(labsRoot(), `${id}.json`));
  for (const line of [
    ...(await reapStale(root)),
    ...(await reapStaleLabs()),
    ...(await reapStaleNodeCgroups(labLive)),
  ])
    console.warn(line);
  const dir = await mkdtemp(join(root, `jest-${process.pid}-`));
  const state = await startControlPlane({ dir, ownerPid: process.pid, podCidr: "10.244.0.0/16" });
  // If Jest dies without running the teardown, the exit handler still stops the processes.
  process.once("exit", () => killControlPlaneNow(state));
  (globalThis as SharedControlPlane).__portableLbControlPlane = state;
  process.env[TEST_ENV.kubeconfig] = state.kubeconfig;
  process.env[TEST_ENV.server] = state.server;
}
