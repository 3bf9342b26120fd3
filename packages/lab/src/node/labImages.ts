// The images the lab's nodes run, each imported into every node's containerd under the name pods use
// (no registry is reachable or needed): the lab's own (scripts/bootstrap/images.sh builds them;
// scripts/toolenv.sh names each one's archive and reference) and this checkout's LB image.
import { existsSync } from "node:fs";
import { builtLbImage } from "../builtLbImage.ts";

export interface LabImage {
  /** The OCI archive to import. */
  archive: string;
  /** The name it is stored under, and pods' `image`. */
  ref: string;
}

/** pause: the pod sandbox; flannel: its DaemonSet; busybox: the demo web app and the node tests. */
export type LabImageName = "pause" | "flannel" | "busybox";

export function labImage(name: LabImageName, env: NodeJS.ProcessEnv = process.env): LabImage {
  const key = `PORTABLE_LB_${name.toUpperCase()}_IMAGE`;
  const archive = env[`${key}_ARCHIVE`];
  const ref = env[`${key}_REF`];
  if (!archive || !ref || !existsSync(archive))
    throw new Error(
      `the lab's ${name} image is missing (${key}_ARCHIVE=${archive ?? "unset"}): run scripts/bootstrap.sh, and run with scripts/toolenv.sh sourced`,
    );
  return { archive, ref };
}

/** Every image a lab node imports. */
export function labNodeImages(): LabImage[] {
  return [labImage("pause"), labImage("flannel"), labImage("busybox"), builtLbImage()];
}
