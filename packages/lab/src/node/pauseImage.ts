// The pod sandbox image every lab node's containerd runs: Kubernetes' own pause (built by the
// bootstrap from k8s.io/kubernetes' build/pause at the node version) in an image of ours,
// scripts/bootstrap/images.sh; scripts/toolenv.sh names its archive and reference.
import { existsSync } from "node:fs";

export interface PauseImage {
  /** The OCI archive to import. */
  archive: string;
  /** The name it is stored under: the kubelet's and containerd's sandbox image. */
  ref: string;
}

export function pauseImage(env: NodeJS.ProcessEnv = process.env): PauseImage {
  const archive = env.PORTABLE_LB_PAUSE_IMAGE_ARCHIVE;
  const ref = env.PORTABLE_LB_PAUSE_IMAGE_REF;
  if (!archive || !ref || !existsSync(archive)) {
    throw new Error(
      `the lab nodes' pause image is missing (PORTABLE_LB_PAUSE_IMAGE_ARCHIVE=${archive ?? "unset"}): run scripts/bootstrap.sh, and run with scripts/toolenv.sh sourced`,
    );
  }
  return { archive, ref };
}
