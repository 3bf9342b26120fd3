// The kubelet's layout for ConfigMap, Secret, downward-API and projected volumes: the files live in a
// timestamped folder, `..data` is a symlink to it, and each top-level name is a symlink through
// `..data`. An update writes a new folder and swaps `..data` with one rename, so a container that
// bind-mounted the volume folder sees the old set of files or the new one, never a mix.
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";

export interface ProjectedFile {
  content: Buffer;
  /** File mode, e.g. 0o644. */
  mode: number;
}

export class ProjectionError extends Error {}

const DATA = "..data";

/** A relative path that stays inside the volume (no "..", not absolute, no empty part). */
export function checkRelativePath(path: string): void {
  const parts = path.split("/");
  if (path === "" || path.startsWith("/") || parts.some((p) => p === "" || p === ".." || p === ".")) {
    throw new ProjectionError(`invalid path "${path}" in a volume (must be relative, without "..")`);
  }
  if (parts[0]!.startsWith(".."))
    throw new ProjectionError(`invalid path "${path}": must not start with ".."`);
}

/** Whether `dir` already holds exactly `files` (so nothing needs writing). */
function sameContents(dir: string, files: Map<string, ProjectedFile>, gid: number | undefined): boolean {
  const current = join(dir, DATA);
  if (!existsSync(current)) return false;
  const listed = (base: string, prefix = ""): string[] =>
    readdirSync(join(base, prefix), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? listed(base, join(prefix, e.name)) : [join(prefix, e.name)],
    );
  const present = listed(current);
  if (present.length !== files.size) return false;
  for (const [path, f] of files) {
    const full = join(current, path);
    if (!existsSync(full)) return false;
    const st = lstatSync(full);
    if ((st.mode & 0o7777) !== f.mode || (gid !== undefined && st.gid !== gid)) return false;
    if (!readFileSync(full).equals(f.content)) return false;
  }
  return true;
}

/**
 * Makes `dir` hold exactly `files` (relative path → content and mode), in the layout above.
 * With `gid` (the pod's fsGroup), files and folders belong to that group. Returns whether it wrote.
 */
export function writeAtomically(dir: string, files: Map<string, ProjectedFile>, gid?: number): boolean {
  for (const path of files.keys()) checkRelativePath(path);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (sameContents(dir, files, gid)) return false;
  const stamp = `..${new Date().toISOString().replace(/[:.]/g, "_")}.${process.pid}.${Math.random().toString(36).slice(2, 8)}`;
  const fresh = join(dir, stamp);
  mkdirSync(fresh, { mode: 0o755 });
  for (const [path, f] of files) {
    const full = join(fresh, path);
    mkdirSync(dirname(full), { recursive: true, mode: 0o755 });
    writeFileSync(full, f.content, { mode: f.mode });
    chmodSync(full, f.mode); // writeFileSync's mode passes through the umask
    if (gid !== undefined) chownSync(full, 0, gid);
  }
  if (gid !== undefined) chownSync(fresh, 0, gid);
  const previous = existsSync(join(dir, DATA)) ? readlinkSync(join(dir, DATA)) : undefined;
  rmSync(join(dir, "..data_tmp"), { force: true });
  symlinkSync(stamp, join(dir, "..data_tmp"));
  renameSync(join(dir, "..data_tmp"), join(dir, DATA));
  // Top-level names: one symlink each through ..data; names no longer projected go away.
  const top = new Set([...files.keys()].map((p) => p.split("/")[0]!));
  for (const name of top) {
    const link = join(dir, name);
    if (!existsSync(link) && !isSymlink(link)) symlinkSync(join(DATA, name), link);
  }
  for (const name of readdirSync(dir)) {
    if (!name.startsWith("..") && !top.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
  }
  if (previous !== undefined && previous !== stamp)
    rmSync(join(dir, previous), { recursive: true, force: true });
  return true;
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}
