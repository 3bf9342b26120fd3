// The lab's own images (a test's userland, say) go through the project's one image builder,
// scripts/image/ociImage.sh: buildah, daemonless, reproducible. This only calls it.
import { join } from "node:path";
import { execCommand } from "../netns/netnsLab.ts";

const OCI_IMAGE_SH = join(__dirname, "../../../../scripts/image/ociImage.sh");

export interface OciImageSpec {
  /** The full name containerd stores it under, e.g. `localhost/portable-lb/busybox-test:lab`. */
  ref: string;
  /** A folder copied to the image's `/`. */
  rootfs?: string;
  entrypoint: string[];
  user?: string;
}

/** Builds `spec` into the OCI archive `out`; returns its manifest digest. */
export async function buildOciImage(spec: OciImageSpec, out: string): Promise<string> {
  const args = [
    "--out",
    out,
    "--ref",
    spec.ref,
    "--timestamp",
    "0",
    "--entrypoint",
    JSON.stringify(spec.entrypoint),
  ];
  if (spec.rootfs !== undefined) args.push("--rootfs", spec.rootfs);
  if (spec.user !== undefined) args.push("--user", spec.user);
  const r = await execCommand(OCI_IMAGE_SH, args, { timeoutMs: 300_000 });
  if (r.code !== 0) throw new Error(`image ${spec.ref}: ${OCI_IMAGE_SH} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}
