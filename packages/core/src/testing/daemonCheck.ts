// Checks rendered routing-daemon configs with the daemons' own parsers (the LB image's BIRD and Debian frr), so a
// golden file is known to load, not just to look right. Nothing is started: parse only.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface CheckResult {
  accepted: boolean;
  /** What the checker printed: the reason when rejected. */
  output: string;
}

/** The first `name` on PATH: the tests' BIRD is the LB image's build, which scripts/with-tools puts first. */
function onPath(name: string): string {
  const dirs = (process.env.PATH ?? "").split(":").filter((d) => d !== "");
  return dirs.map((d) => join(d, name)).find((p) => existsSync(p)) ?? name;
}

export const DAEMON_PATHS = {
  bird: onPath("bird"),
  vtysh: "/usr/bin/vtysh",
  bgpd: "/usr/lib/frr/bgpd",
};

function requireBinary(path: string, pkg: string): void {
  if (!existsSync(path)) throw new Error(`${pkg} not installed: run scripts/bootstrap.sh (no ${path})`);
}

function run(command: string, args: string[]): { status: number | null; output: string } {
  const r = spawnSync(command, args, { encoding: "utf8", timeout: 30_000 });
  if (r.error) throw r.error;
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

function withTempFiles<T>(files: Record<string, string>, use: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "plb-daemon-check-"));
  try {
    // World-readable: FRR daemons started as root drop to the frr user before reading the config.
    chmodSync(dir, 0o755);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text, { mode: 0o644 });
    return use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `bird -p -c FILE`: BIRD parses and validates the whole config, then exits. */
export function checkBirdConfig(text: string, bird = DAEMON_PATHS.bird): CheckResult {
  requireBinary(bird, "bird");
  return withTempFiles({ "bird.conf": text }, (dir) => {
    const r = run(bird, ["-p", "-c", join(dir, "bird.conf")]);
    return { accepted: r.status === 0, output: r.output };
  });
}

/**
 * FRR 8.4 in two passes, as neither is enough alone:
 * - `vtysh --dryrun -f FILE` parses every line against all daemons' command trees (exit 2 on an
 *   unknown command or a command in the wrong node) but runs no command, so it misses semantic
 *   errors such as a neighbor joining a peer-group that does not exist;
 * - `bgpd --dryrun -f FILE` runs the commands, but only bgpd's, and exits 0 even when some fail,
 *   so its log is scanned for error codes. Top-level `bfd` blocks (bfdd's) are blanked for it,
 *   keeping line numbers. bfdd's own dry run is skipped: as root it drops to the frr user and
 *   binds its control socket under /var/run/frr.
 */
export function checkFrrConfig(text: string, paths = DAEMON_PATHS): CheckResult {
  requireBinary(paths.vtysh, "frr");
  requireBinary(paths.bgpd, "frr");
  return withTempFiles({ "frr.conf": text, "bgpd.conf": blankBfdBlocks(text) }, (dir) => {
    const vtysh = run(paths.vtysh, ["--dryrun", "--inputfile", join(dir, "frr.conf")]);
    if (vtysh.status !== 0) return { accepted: false, output: `vtysh --dryrun: ${vtysh.output}` };
    const bgpd = run(paths.bgpd, ["--dryrun", "--config_file", join(dir, "bgpd.conf"), "--log", "stdout"]);
    const failed = bgpd.status !== 0 || /\[EC \d+\]/.test(bgpd.output);
    return { accepted: !failed, output: failed ? `bgpd --dryrun: ${bgpd.output}` : vtysh.output };
  });
}

function blankBfdBlocks(text: string): string {
  let inBfd = false;
  return text
    .split("\n")
    .map((line) => {
      if (line === "bfd") inBfd = true;
      if (!inBfd) return line;
      if (line === "exit") inBfd = false;
      return "!";
    })
    .join("\n");
}
