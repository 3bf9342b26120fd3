// The node tests' image: Debian's static busybox (busybox-static, from APT_PACKAGES) with a link
// per applet in /bin, so a pod has a shell, an HTTP server and the usual commands, all from one file.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildOciImage } from "@portable-lb/lab";

export const BUSYBOX_IMAGE = "localhost/portable-lb/busybox-test:lab";
const BUSYBOX = "/bin/busybox";

export async function writeBusyboxImage(archive: string): Promise<void> {
  const applets = execFileSync(BUSYBOX, ["--list"], { encoding: "utf8" }).split("\n").filter(Boolean);
  const rootfs = mkdtempSync(join(tmpdir(), "plb-busybox-"));
  try {
    mkdirSync(join(rootfs, "bin"));
    copyFileSync(BUSYBOX, join(rootfs, "bin/busybox"));
    for (const a of applets.filter((a) => a !== "busybox")) symlinkSync("busybox", join(rootfs, "bin", a));
    await buildOciImage({ ref: BUSYBOX_IMAGE, rootfs, entrypoint: ["/bin/sh"] }, archive);
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}
