// A writer for the cpio "newc" format, the one Linux unpacks as an initramfs. Written here rather
// than calling the cpio command so a test's files become an archive in memory, with no staging
// folder on disk and exact control over modes and owners (root, as the guest expects).

export interface CpioEntry {
  /** Path inside the archive, relative ("test/run.sh"); parent folders must come first. */
  path: string;
  /**
   * "dir" entries have no content; files get mode 0755 when executable, else 0644; a "symlink"'s
   * content is its target.
   */
  type: "dir" | "file" | "symlink";
  content?: string | Uint8Array;
  executable?: boolean;
}

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const TRAILER = "TRAILER!!!";

/** The archive holding `entries` in order, ending with the trailer entry. */
export function cpioNewc(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  entries.forEach((entry, i) => {
    checkPath(entry.path);
    const data = entry.type === "dir" ? Buffer.alloc(0) : Buffer.from(entry.content ?? "");
    const mode =
      entry.type === "dir"
        ? S_IFDIR | 0o755
        : entry.type === "symlink"
          ? S_IFLNK | 0o777
          : S_IFREG | (entry.executable ? 0o755 : 0o644);
    parts.push(record(entry.path, { ino: i + 1, mode, nlink: entry.type === "dir" ? 2 : 1 }, data));
  });
  parts.push(record(TRAILER, { ino: 0, mode: 0, nlink: 1 }, Buffer.alloc(0)));
  return Buffer.concat(parts);
}

function checkPath(path: string): void {
  const segments = path.split("/");
  if (path === "" || path.startsWith("/") || segments.some((s) => s === "" || s === "." || s === ".."))
    throw new Error(`cpio entry path must be relative and plain (no "", ".", ".." segments): got "${path}"`);
  if (path === TRAILER) throw new Error(`cpio entry path "${TRAILER}" is reserved for the archive's end`);
}

interface Header {
  ino: number;
  mode: number;
  nlink: number;
}

// Header: magic, then 13 fields of 8 hex digits; name (NUL-terminated) and data are each padded so
// the next part starts on a 4-byte boundary, which the kernel's unpacker requires.
function record(name: string, h: Header, data: Buffer): Buffer {
  const nameBytes = Buffer.from(`${name}\0`);
  const fields = [h.ino, h.mode, 0, 0, h.nlink, 0, data.length, 0, 0, 0, 0, nameBytes.length, 0];
  const header = Buffer.from("070701" + fields.map((f) => f.toString(16).padStart(8, "0")).join(""), "ascii");
  return Buffer.concat([header, nameBytes, pad(header.length + nameBytes.length), data, pad(data.length)]);
}

function pad(length: number): Buffer {
  return Buffer.alloc((4 - (length % 4)) % 4);
}
