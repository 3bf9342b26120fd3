// Runs a shell script inside a QEMU guest whose kernel has IPVS (this machine's has none): Debian's
// 6.1 kernel and a busybox initramfs built by scripts/bootstrap/ipvsGuest.sh, under TCG (nested KVM
// hangs here). The script travels as a second cpio archive appended to the base initramfs (Linux
// unpacks concatenated archives in order): unlike the kernel command line (2 KiB, no newlines or
// quoting), that carries any size, any bytes and several files.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { StringDecoder } from "node:string_decoder";
import { dirname, join } from "node:path";
import { cpioNewc, type CpioEntry } from "./cpioNewc.ts";
import { extractGuestOutput } from "./guestOutput.ts";
import { requireCommand } from "@portable-lb/lab";
import { repoRoot } from "../repoRoot.ts";

export { GUEST_PATHS, GUEST_TEST_DIR } from "./guestPaths.ts";

export interface IpvsGuestRun {
  /** Shell (dash) script run as /test/run.sh, as root, with stdout and stderr captured together. */
  script: string;
  /** More files for the script, by path relative to /test (e.g. "rules.txt" is /test/rules.txt). */
  files?: Record<string, string>;
  /** The whole run, boot included; QEMU is killed past it. Default 120 s. */
  timeoutMs?: number;
  /** More archive entries, at their own paths (e.g. guestNode.ts's Node.js); parents first. */
  extra?: CpioEntry[];
  /** Guest memory in MiB; default 512. */
  memoryMib?: number;
  /**
   * The API server on this machine's loopback port to reach from the guest, at GUEST_API; else the
   * guest has no network device at all.
   */
  apiServerPort?: number;
  /**
   * How many NICs reach it (GUEST_API.nic, then eth1, ...), one per guest namespace that watches
   * the API server (each of QEMU's user networks is its own, with its own forward); default 1.
   */
  apiLinks?: number;
  /** Called with each line the guest prints, as it comes (the test's script can ask for steps). */
  onLine?: (line: string) => void;
}

/**
 * How the guest reaches the API server: QEMU's user networking with `restrict=on` (the guest reaches
 * no host address and nothing beyond) and one forward, from `address`:`port` to the API server. The
 * guest configures its NIC (`nic`, the e1000 its image loads) with `guestAddress` itself.
 */
export const GUEST_API = {
  address: "10.0.2.100",
  port: 6443,
  nic: "eth0",
  guestAddress: "10.0.2.15/24",
} as const;

export interface IpvsGuestResult {
  /** What the script printed (console line ends normalised to "\n"). */
  output: string;
  exitCode: number;
  wallMs: number;
}

export interface IpvsGuestImage {
  dir: string;
  kernel: string;
  initramfs: string;
}

export const IPVS_GUEST_DEFAULT_TIMEOUT_MS = 120_000;
const QEMU = "qemu-system-x86_64";
const BOOTSTRAP_HINT = "run scripts/bootstrap.sh";

/** The bootstrapped kernel and initramfs; a clear error when they are missing. */
export function ipvsGuestImage(): IpvsGuestImage {
  const root = repoRoot();
  // The cache path (version, revision, $PORTABLE_LB_CACHE) is defined once, in the bootstrap script.
  const found = spawnSync(
    "bash",
    [
      "-c",
      '. "$1/scripts/bootstrap/common.sh" && . "$1/scripts/bootstrap/ipvsGuest.sh" && ipvs_guest_dir',
      "_",
      root,
    ],
    // Explicit env: Jest's sandboxed process.env (PORTABLE_LB_CACHE may be set there) is not the one
    // child processes inherit by default.
    { encoding: "utf8", env: process.env },
  );
  const dir = found.stdout.trim();
  if (found.status !== 0 || !dir)
    throw new Error(`cannot locate the IPVS guest image (${found.stderr.trim()}): ${BOOTSTRAP_HINT}`);
  const image = { dir, kernel: join(dir, "vmlinuz"), initramfs: join(dir, "initramfs.cpio.gz") };
  if (!existsSync(join(dir, ".complete")) || !existsSync(image.kernel) || !existsSync(image.initramfs))
    throw new Error(`the IPVS guest image is missing (${dir}): ${BOOTSTRAP_HINT}`);
  return image;
}

/** Boots the guest, runs `opts.script` in it and returns its output and exit code. */
export async function runInIpvsGuest(opts: IpvsGuestRun): Promise<IpvsGuestResult> {
  const image = ipvsGuestImage();
  requireCommand(QEMU, `${BOOTSTRAP_HINT} (it installs the Debian package qemu-system-x86)`);
  const timeoutMs = opts.timeoutMs ?? IPVS_GUEST_DEFAULT_TIMEOUT_MS;
  const runId = randomBytes(8).toString("hex");
  const tmp = mkdtempSync(join(tmpdir(), "plb-ipvs-guest-"));
  try {
    const initrd = join(tmp, "initrd");
    writeFileSync(
      initrd,
      combinedInitrd(readFileSync(image.initramfs), [
        testArchive(opts),
        ...(opts.extra ? [cpioNewc(opts.extra)] : []),
      ]),
    );
    const args = [
      ...["-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", String(opts.memoryMib ?? 512)],
      ...(opts.apiServerPort === undefined
        ? ["-nic", "none"]
        : Array.from({ length: opts.apiLinks ?? 1 }, () => ["-nic", apiForward(opts.apiServerPort!)]).flat()),
      ...["-nographic", "-no-reboot", "-kernel", image.kernel, "-initrd", initrd],
      // quiet + panic=-1: a failing /init ends QEMU at once instead of hanging; mitigations=off
      // spares emulated page-table switches on every syscall, which cost real time under TCG.
      ...["-append", `console=ttyS0 quiet panic=-1 mitigations=off plb_run=${runId}`],
    ];
    const run = await runQemu(args, timeoutMs, opts.onLine);
    const found = extractGuestOutput(run.serial, runId);
    if (!found) {
      const why = run.timedOut
        ? `did not finish within ${timeoutMs} ms`
        : `stopped (QEMU exit ${run.exitCode})`;
      throw new Error(
        `the IPVS guest ${why} before its test script ended.\n--- QEMU stderr ---\n${tail(run.stderr)}\n--- serial console (last lines) ---\n${tail(run.serial)}`,
      );
    }
    return { ...found, wallMs: run.wallMs };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

// QEMU runs the command for each connection the guest opens to the forwarded address, with the
// connection as its stdin and stdout: busybox's nc (the bootstrap installs busybox-static) joins it
// to the API server's port.
function apiForward(port: number): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`apiServerPort must be a TCP port (got ${port})`);
  requireCommand("busybox", `${BOOTSTRAP_HINT} (it installs the Debian package busybox-static)`);
  return `user,restrict=on,guestfwd=tcp:${GUEST_API.address}:${GUEST_API.port}-cmd:busybox nc 127.0.0.1 ${port}`;
}

function testArchive(opts: IpvsGuestRun): Buffer {
  const dirs = new Set<string>(["test"]);
  const files: CpioEntry[] = [{ path: "test/run.sh", type: "file", content: opts.script, executable: true }];
  for (const [name, content] of Object.entries(opts.files ?? {})) {
    if (name === "run.sh") throw new Error('files: "run.sh" is the script itself; pass it as `script`');
    const path = `test/${name}`;
    for (let d = dirname(path); d !== "."; d = dirname(d)) dirs.add(d);
    files.push({ path, type: "file", content, executable: content.startsWith("#!") });
  }
  // Parents before children: sorting puts "test" before "test/x".
  const dirEntries = [...dirs].sort().map((path): CpioEntry => ({ path, type: "dir" }));
  return cpioNewc([...dirEntries, ...files]);
}

// The kernel finds an uncompressed archive after a compressed one only at a 4-byte boundary; the
// zero bytes between them are skipped as padding. Archives are unpacked in order.
function combinedInitrd(base: Buffer, extra: Buffer[]): Buffer {
  return Buffer.concat([base, Buffer.alloc((4 - (base.length % 4)) % 4), ...extra]);
}

interface QemuRun {
  serial: string;
  stderr: string;
  exitCode: number | null;
  timedOut: boolean;
  wallMs: number;
}

function runQemu(args: string[], timeoutMs: number, onLine?: (line: string) => void): Promise<QemuRun> {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(QEMU, args, { stdio: ["ignore", "pipe", "pipe"] });
    const serial: Buffer[] = [];
    const stderr: Buffer[] = [];
    let partial = "";
    const decoder = new StringDecoder("utf8");
    child.stdout.on("data", (chunk: Buffer) => {
      serial.push(chunk);
      if (!onLine) return;
      const lines = (partial + decoder.write(chunk)).split("\n");
      partial = lines.pop()!;
      for (const line of lines) onLine(line.replace(/\r$/, ""));
    });
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    // A test runner that exits mid-run must not leave an emulator spinning on both CPUs.
    const killOnExit = (): void => void child.kill("SIGKILL");
    process.once("exit", killOnExit);
    const done = (): void => {
      clearTimeout(timer);
      process.removeListener("exit", killOnExit);
    };
    child.on("error", (err) => {
      done();
      reject(new Error(`${QEMU} could not be started: ${err.message}`));
    });
    child.on("close", (code) => {
      done();
      resolvePromise({
        serial: Buffer.concat(serial).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
        exitCode: code,
        timedOut,
        wallMs: Date.now() - started,
      });
    });
  });
}

function tail(text: string, lines = 30): string {
  return text.replaceAll("\r\n", "\n").trimEnd().split("\n").slice(-lines).join("\n") || "(nothing)";
}
