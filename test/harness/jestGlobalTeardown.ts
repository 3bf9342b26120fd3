import { stopControlPlane } from "../../packages/providers/src/lab/controlPlane/controlPlane.ts";
import type { SharedControlPlane } from "./testEnv.ts";

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as SharedControlPlane).__portableLbControlPlane;
  if (state) await stopControlPlane(state);
}
