// STAND-IN until the project's daemonless image builder (issue 14, item 1) is merged: writes an OCI
// image archive of one layer from files of this machine, enough for the lab nodes' pause image and
// the node tests' image. Replace its callers with that builder, then delete this file.
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { execCommand } from "../netns/netnsLab.ts";

export interface ImageFile {
  /** Absolute path inside the image. */
  path: string;
  /** A file of this machine to copy there, or a symlink target. */
  from?: string;
  symlink?: string;
}

export interface ImageSpec {
  /** The full name containerd stores it under, e.g. `localhost/portable-lb/pause:lab`. */
  name: string;
  files: ImageFile[];
  entrypoint: string[];
  cmd?: string[];
  user?: string;
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

async function tar(args: string[]): Promise<void> {
  const r = await execCommand("tar", args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`image archive: 'tar ${args.join(" ")}' failed: ${r.stderr.trim()}`);
}

/** Writes `spec` as an OCI archive (an OCI image layout in a tar) to `archive`. */
export async function writeOciArchive(spec: ImageSpec, archive: string): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "plb-oci-"));
  try {
    const rootfs = join(work, "rootfs");
    for (const f of spec.files) {
      const target = join(rootfs, f.path);
      mkdirSync(dirname(target), { recursive: true });
      if (f.symlink !== undefined) symlinkSync(f.symlink, target);
      else if (f.from !== undefined) cpSync(f.from, target, { dereference: true });
    }
    // Reproducible: fixed owner and times, sorted entries.
    const layerFile = join(work, "layer.tar");
    await tar([
      ...["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner"],
      ...["-cf", layerFile, "-C", rootfs, "."],
    ]);
    const layout = join(work, "layout");
    const blobs = join(layout, "blobs", "sha256");
    mkdirSync(blobs, { recursive: true });
    const blob = (data: Buffer | string) => {
      const digest = sha256(data);
      writeFileSync(join(blobs, digest), data);
      return { digest: `sha256:${digest}`, size: Buffer.byteLength(data) };
    };
    const layer = blob(readFileSync(layerFile));
    const config = blob(
      JSON.stringify({
        architecture: "amd64",
        os: "linux",
        config: {
          Entrypoint: spec.entrypoint,
          ...(spec.cmd ? { Cmd: spec.cmd } : {}),
          ...(spec.user ? { User: spec.user } : {}),
          Env: ["PATH=/bin"],
        },
        rootfs: { type: "layers", diff_ids: [layer.digest] },
      }),
    );
    const manifest = blob(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
      }),
    );
    const tag = spec.name.slice(spec.name.lastIndexOf(":") + 1);
    writeFileSync(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
    writeFileSync(
      join(layout, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        manifests: [
          {
            mediaType: "application/vnd.oci.image.manifest.v1+json",
            ...manifest,
            platform: { architecture: "amd64", os: "linux" },
            // containerd imports it under exactly this name.
            annotations: { "io.containerd.image.name": spec.name, "org.opencontainers.image.ref.name": tag },
          },
        ],
      }),
    );
    mkdirSync(dirname(archive), { recursive: true });
    await tar(["--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-cf", archive, "-C", layout, "."]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
