import { stopControlPlane } from "@portable-lb/lab";
import type { SharedControlPlane } from "./testEnv.ts";

export default async function globalTeardown(): Promise<void> {
  const shared = globalThis as SharedControlPlane;
  const state = shared.__portableLbControlPlane;
  shared.__portableLbControlPlane = undefined; // a second project's teardown finds it stopped
  if (state) await stopControlPlane(state);
}
