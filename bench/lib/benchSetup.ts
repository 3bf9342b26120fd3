// What every benchmark starts with: progress lines on stderr, stale labs and control planes of
// earlier (killed) runs reaped, and a local control plane of its own, stopped by the teardown.
import { mkdirSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { join } from "node:path";
import {
  type ControlPlaneState,
  instancesRoot,
  killControlPlaneNow,
  reapStale,
  reapStaleLabs,
  startControlPlane,
  stopControlPlane,
} from "@portable-lb/lab";
import type { Teardown } from "./teardown.ts";

export function progress(text: string): void {
  console.error(`[${new Date().toISOString().slice(11, 19)}] ${text}`);
}

export async function benchControlPlane(teardown: Teardown, name: string): Promise<ControlPlaneState> {
  const root = instancesRoot();
  mkdirSync(root, { recursive: true });
  for (const line of [...(await reapStale(root)), ...(await reapStaleLabs())]) progress(line);
  progress("starting a local control plane for the benchmark");
  const cp = await startControlPlane({
    dir: await mkdtemp(join(root, `${name}-${process.pid}-`)),
    ownerPid: process.pid,
  });
  teardown.add({
    name: "control plane",
    stop: () => stopControlPlane(cp),
    killNow: () => killControlPlaneNow(cp),
  });
  return cp;
}
