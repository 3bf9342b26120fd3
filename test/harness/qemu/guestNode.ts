// Node.js inside the IPVS guest, so a test can run our own code (the IPVS engine) against the
// guest's real IPVS: the very node binary running the tests (Node 24 from the bootstrap) and the
// shared libraries it links, found with ldd on this machine (Debian 12, as the guest's userland),
// go into an extra uncompressed archive (unpacking it costs ~1 s under TCG; gzip would cost more).
// Measured: the archive is ~130 MB, the guest needs ~1 GiB of memory, node starts in ~1.5 s.
import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { dirname } from "node:path";
import type { CpioEntry } from "./cpioNewc.ts";

/** Where node is in the guest. */
export const GUEST_NODE = "/usr/local/bin/node";
/** Guest memory for a run with node (the unpacked archive lives in RAM). */
export const GUEST_NODE_MEMORY_MIB = 1024;

export interface GuestNodeExtras {
  /** More of this machine's programs (guest path -> host path), with the libraries they link. */
  programs?: Record<string, string>;
  /** Symbolic links (guest path -> target). */
  symlinks?: Record<string, string>;
}

/** Archive entries for node and its libraries, plus `files` (guest path -> host path). */
export function guestNodeEntries(
  files: Record<string, string> = {},
  extras: GuestNodeExtras = {},
): CpioEntry[] {
  const programs = { [GUEST_NODE]: process.execPath, ...extras.programs };
  const libs: Record<string, string> = {};
  for (const program of Object.values(programs))
    for (const line of execFileSync("ldd", [program], { encoding: "utf8" }).split("\n")) {
      const m = /=>\s+(\/\S+)/.exec(line);
      if (m) libs[m[1]!] = realpathSync(m[1]!);
      else if (/not found/.test(line))
        throw new Error(`guestNode: ${program} needs a library ldd cannot find: ${line.trim()}`);
    }
  return withParents(
    { ...programs, ...libs, ...files },
    new Set(Object.keys(programs)),
    extras.symlinks ?? {},
  );
}

function withParents(
  files: Record<string, string>,
  executables: Set<string>,
  symlinks: Record<string, string>,
): CpioEntry[] {
  const dirs = new Set<string>();
  for (const path of [...Object.keys(files), ...Object.keys(symlinks)])
    for (let d = dirname(path); d !== "/"; d = dirname(d)) dirs.add(d.slice(1));
  return [
    // Parents before children: sorting puts "a" before "a/b".
    ...[...dirs].sort().map((path): CpioEntry => ({ path, type: "dir" })),
    ...Object.entries(files).map(([path, host]): CpioEntry => ({
      path: path.slice(1),
      type: "file",
      content: readFileSync(host),
      executable: executables.has(path) || isExecutable(host),
    })),
    ...Object.entries(symlinks).map(([path, target]): CpioEntry => ({
      path: path.slice(1),
      type: "symlink",
      content: target,
    })),
  ];
}

/** Files keep their owner-execute bit (the LB image's launchers run by PATH and shebang). */
const isExecutable = (host: string) => (statSync(host).mode & 0o100) !== 0;
