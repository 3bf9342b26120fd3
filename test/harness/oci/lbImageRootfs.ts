// The LB image this checkout built (`npm run image` records it in lb-image/.image.json), unpacked
// once for every test and benchmark that runs its containers: beside the archive in the image
// cache, keyed by the image's digest (build.sh prunes it with its archive). A Jest worker unpacks it
// at most once; workers that race each unpack to a folder of their own and the first rename wins.
// Containers share it read-only (their specs ask for a read-only root); runc only adds the empty
// mountpoints their volumes need.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { repoRoot } from "../repoRoot.ts";
import { unpackOciArchive, type UnpackedImage } from "./ociArchive.ts";

/** What lb-image/image/build.sh records for this checkout. */
export interface BuiltImage {
  ref: string;
  digest: string;
  archive: string;
  sbom: string;
  sbomInImage: string;
}

export const BUILT_IMAGE_RECORD = join(repoRoot(), "lb-image/.image.json");

export function builtImage(): BuiltImage {
  if (!existsSync(BUILT_IMAGE_RECORD))
    throw new Error(
      `${BUILT_IMAGE_RECORD} is missing: build the LB image with 'npm run image' (npm test's bootstrap does)`,
    );
  return JSON.parse(readFileSync(BUILT_IMAGE_RECORD, "utf8")) as BuiltImage;
}

async function unpackShared(built: BuiltImage): Promise<UnpackedImage> {
  const dir = join(dirname(built.archive), `unpacked-${built.digest.replace(/^sha256:/, "").slice(0, 16)}`);
  const record = join(dir, "image.json");
  if (!existsSync(record)) {
    const staging = `${dir}.${process.pid}`;
    rmSync(staging, { recursive: true, force: true });
    try {
      const image = await unpackOciArchive(built.archive, staging);
      if (image.digest !== built.digest)
        throw new Error(
          `${built.archive} holds image ${image.digest}, but ${BUILT_IMAGE_RECORD} says ${built.digest}`,
        );
      rmSync(join(staging, "layout"), { recursive: true, force: true });
      writeFileSync(join(staging, "image.json"), JSON.stringify({ ...image, rootfs: undefined }));
      try {
        renameSync(staging, dir);
      } catch (err) {
        // Another worker's copy got there first: use it.
        if (!existsSync(record)) throw err;
      }
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  return {
    ...(JSON.parse(readFileSync(record, "utf8")) as Omit<UnpackedImage, "rootfs">),
    rootfs: join(dir, "rootfs"),
  };
}

let unpacked: Promise<UnpackedImage> | undefined;

/** The built LB image's root filesystem and config, unpacked on first use. */
export function lbImageRootfs(): Promise<UnpackedImage> {
  unpacked ??= unpackShared(builtImage());
  return unpacked;
}
