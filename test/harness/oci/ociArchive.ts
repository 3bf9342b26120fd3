// An OCI image archive (what scripts/image/ociImage.sh writes) unpacked for a runtime: the index,
// its one manifest, the image config, and the layers applied in order to a root filesystem, each
// blob checked against its digest. Only what our images use: one platform, gzip layers, no
// whiteouts (a layer that deletes files is refused, not applied wrongly).
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execCommand } from "@portable-lb/lab";

/** The image config's runtime part (OCI image spec, `config`). */
export interface ImageConfig {
  User?: string;
  Env?: string[];
  Cmd?: string[];
  Entrypoint?: string[];
  WorkingDir?: string;
  Labels?: Record<string, string>;
}

export interface UnpackedImage {
  /** The manifest's digest: what a registry or containerd calls the image by. */
  digest: string;
  /** The name stored in the index (org.opencontainers.image.ref.name). */
  refName: string | undefined;
  config: ImageConfig;
  created: string;
  layers: number;
  rootfs: string;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  annotations?: Record<string, string>;
}

async function run(command: string, args: string[]): Promise<void> {
  const r = await execCommand(command, args, { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`${command} ${args.join(" ")}: exit ${r.code}: ${r.stderr.trim()}`);
}

/** Unpacks `archive` below `dir` (dir/layout, dir/rootfs). */
export async function unpackOciArchive(archive: string, dir: string): Promise<UnpackedImage> {
  const layout = join(dir, "layout");
  const rootfs = join(dir, "rootfs");
  mkdirSync(layout, { recursive: true });
  mkdirSync(rootfs, { recursive: true });
  await run("tar", ["-xf", archive, "-C", layout]);
  const blob = (d: Descriptor) => {
    const path = join(layout, "blobs", ...d.digest.split(":"));
    const bytes = readFileSync(path);
    const actual = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    if (actual !== d.digest) throw new Error(`blob ${d.digest} has digest ${actual}`);
    return { path, bytes };
  };
  const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests: Descriptor[] };
  if (index.manifests.length !== 1)
    throw new Error(`${archive}: ${index.manifests.length} manifests, want 1`);
  const top = index.manifests[0]!;
  const manifest = JSON.parse(blob(top).bytes.toString("utf8")) as {
    config: Descriptor;
    layers: Descriptor[];
  };
  const config = JSON.parse(blob(manifest.config).bytes.toString("utf8")) as {
    created: string;
    config: ImageConfig;
  };
  for (const layer of manifest.layers) {
    if (layer.mediaType !== "application/vnd.oci.image.layer.v1.tar+gzip")
      throw new Error(`layer ${layer.digest}: media type ${layer.mediaType} is not handled here`);
    const { path } = blob(layer);
    const listing = await execCommand("tar", ["-tzf", path], { timeoutMs: 120_000 });
    if (/(^|\/)\.wh\./m.test(listing.stdout)) throw new Error(`layer ${layer.digest} has whiteouts`);
    await run("tar", ["-xzf", path, "-C", rootfs, "--numeric-owner", "--same-permissions", "--xattrs"]);
  }
  return {
    digest: top.digest,
    refName: top.annotations?.["org.opencontainers.image.ref.name"],
    config: config.config,
    created: config.created,
    layers: manifest.layers.length,
    rootfs,
  };
}
