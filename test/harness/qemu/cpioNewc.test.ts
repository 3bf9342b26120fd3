// The newc writer: GNU cpio (the reference reader) unpacks what it writes with the same contents and
// modes, and the layout keeps the 4-byte alignment the kernel's unpacker relies on.
import { spawnSync } from "node:child_process";
import { lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpioNewc } from "./cpioNewc.ts";

const HEADER = 110;

/** Every entry's name, size and mode, read back by walking the headers (the kernel's way). */
function walk(archive: Buffer): { name: string; size: number; mode: number; offset: number }[] {
  const entries = [];
  let offset = 0;
  for (;;) {
    const field = (i: number): number =>
      parseInt(archive.toString("ascii", offset + 6 + 8 * i, offset + 14 + 8 * i), 16);
    expect(archive.toString("ascii", offset, offset + 6)).toBe("070701");
    const nameSize = field(11);
    const size = field(6);
    const name = archive.toString("utf8", offset + HEADER, offset + HEADER + nameSize - 1);
    entries.push({ name, size, mode: field(1), offset });
    const dataStart = Math.ceil((offset + HEADER + nameSize) / 4) * 4;
    offset = Math.ceil((dataStart + size) / 4) * 4;
    if (name === "TRAILER!!!") return entries;
  }
}

describe("cpioNewc", () => {
  const archive = cpioNewc([
    { path: "test", type: "dir" },
    { path: "test/run.sh", type: "file", content: "#!/bin/sh\necho hi\n", executable: true },
    { path: "test/sub", type: "dir" },
    { path: "test/sub/a", type: "file", content: "odd length" },
    { path: "test/empty", type: "file" },
    { path: "test/bin", type: "file", content: new Uint8Array([0, 1, 2, 255]) },
    { path: "test/link", type: "symlink", content: "sub/a" },
  ]);

  it("aligns every header on 4 bytes and ends with the trailer", () => {
    const entries = walk(archive);
    expect(entries.map((e) => e.name)).toEqual([
      "test",
      "test/run.sh",
      "test/sub",
      "test/sub/a",
      "test/empty",
      "test/bin",
      "test/link",
      "TRAILER!!!",
    ]);
    expect(entries.every((e) => e.offset % 4 === 0)).toBe(true);
    expect(archive.length % 4).toBe(0);
    expect(entries.map((e) => e.mode.toString(8))).toEqual([
      "40755",
      "100755",
      "40755",
      "100644",
      "100644",
      "100644",
      "120777",
      "0",
    ]);
  });

  it("unpacks with GNU cpio to the same files and modes", () => {
    const dir = mkdtempSync(join(tmpdir(), "plb-cpio-"));
    try {
      const cpio = spawnSync("cpio", ["-i", "--quiet", "--no-absolute-filenames"], {
        cwd: dir,
        input: archive,
      });
      expect(cpio.error).toBeUndefined();
      expect(cpio.stderr.toString()).toBe("");
      expect(readFileSync(join(dir, "test/run.sh"), "utf8")).toBe("#!/bin/sh\necho hi\n");
      expect(statSync(join(dir, "test/run.sh")).mode & 0o777).toBe(0o755);
      expect(readFileSync(join(dir, "test/sub/a"), "utf8")).toBe("odd length");
      expect(readFileSync(join(dir, "test/empty"))).toHaveLength(0);
      expect([...readFileSync(join(dir, "test/bin"))]).toEqual([0, 1, 2, 255]);
      expect(lstatSync(join(dir, "test/link")).isSymbolicLink()).toBe(true);
      expect(readlinkSync(join(dir, "test/link"))).toBe("sub/a");
      expect(readFileSync(join(dir, "test/link"), "utf8")).toBe("odd length");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each(["", "/etc/passwd", "test/../etc", "test//x", "./x", "TRAILER!!!"])(
    "refuses the path %j",
    (path) => {
      expect(() => cpioNewc([{ path, type: "file" }])).toThrow(/cpio entry path/);
    },
  );
});
