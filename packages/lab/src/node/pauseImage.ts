// The pod sandbox image every lab node's containerd runs: Kubernetes' own pause, compiled by the
// bootstrap from k8s.io/kubernetes (build/pause) at the node version.
import { requireCommand } from "../processes.ts";
import { writeOciArchive } from "./interimOciArchive.ts";

export const PAUSE_IMAGE = "localhost/portable-lb/pause:lab";

/** Writes the pause image's OCI archive to `archive`. */
export async function writePauseImage(archive: string): Promise<void> {
  const pause = requireCommand(
    "pause",
    "run scripts/bootstrap.sh (it builds the kubelet, kube-proxy and pause)",
  );
  await writeOciArchive(
    {
      name: PAUSE_IMAGE,
      files: [{ path: "/pause", from: pause }],
      entrypoint: ["/pause"],
      user: "65535:65535",
    },
    archive,
  );
}
