// The node tests' image: Debian's static busybox (busybox-static, from APT_PACKAGES) with a link
// per applet in /bin, so a pod has a shell, an HTTP server and the usual commands, all from one file.
import { execFileSync } from "node:child_process";
import { writeOciArchive } from "@portable-lb/lab";

export const BUSYBOX_IMAGE = "localhost/portable-lb/busybox-test:lab";
const BUSYBOX = "/bin/busybox";

export async function writeBusyboxImage(archive: string): Promise<void> {
  const applets = execFileSync(BUSYBOX, ["--list"], { encoding: "utf8" }).split("\n").filter(Boolean);
  await writeOciArchive(
    {
      name: BUSYBOX_IMAGE,
      files: [
        { path: "/bin/busybox", from: BUSYBOX },
        ...applets.filter((a) => a !== "busybox").map((a) => ({ path: `/bin/${a}`, symlink: "busybox" })),
      ],
      entrypoint: ["/bin/sh"],
    },
    archive,
  );
}
