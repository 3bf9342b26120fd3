// A lab of Linux network namespaces for tests: hosts (namespaces), veth links and bridges between
// them, and processes running inside them. Everything a lab makes lives inside its own namespaces
// (veths are created directly in them, bridges too), so deleting the namespaces removes every link
// and the host's own network is never touched. What a lab creates is recorded in a state file with
// its owner's pid before it is created, so cleanup is complete and idempotent: `destroy()`, a
// synchronous exit handler, and `reapStaleLabs()` (run by every `NetnsLab.create`) for labs whose
// owner was killed.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { runInThisContext } from "node:vm";
import { instancesRoot } from "../controlPlane/controlPlane.ts";
import {
  commandLine,
  killNow,
  lastLines,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
} from "../processes.ts";
import { parseProcStat } from "../procStat.ts";

/** Linux limit for interface names (IFNAMSIZ - 1). */
export const MAX_IFNAME = 15;
const ID_PREFIX = "pl";
const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,39}$/;
const IP_FIX = "install iproute2 (scripts/bootstrap.sh installs APT_PACKAGES from scripts/versions.env)";

export class NetnsError extends Error {}

// ---- Pure naming helpers (unit-tested) -------------------------------------------------------

/** A short lab id such as "pl3k9z": short so `v<id><n>` interface names stay within 15 characters. */
export function newLabId(random: Uint8Array = randomBytes(4)): string {
  const n = ((random[0]! << 24) | (random[1]! << 16) | (random[2]! << 8) | random[3]!) >>> 0;
  return ID_PREFIX + (n % 36 ** 4).toString(36).padStart(4, "0");
}

/** Whether `id` is a lab id newLabId makes (others, such as another checkout's labs, are not ours). */
export function isLabId(id: string): boolean {
  return new RegExp(`^${ID_PREFIX}[0-9a-z]{4}$`).test(id);
}

/** The `ip netns` name of a lab namespace: `<labid>-<name>`. */
export function namespaceName(labId: string, name: string): string {
  if (!NAME_PATTERN.test(name)) {
    throw new NetnsError(
      `namespace name '${name}' must be 1-40 characters of a-z, 0-9, '-' and '_', starting with a letter or digit`,
    );
  }
  return `${labId}-${name}`;
}

/** The n-th generated interface name of a lab, `v<labid><n>`, refused beyond 15 characters. */
export function interfaceName(labId: string, n: number): string {
  return checkInterfaceName(`v${labId}${n}`);
}

export function checkInterfaceName(name: string): string {
  if (
    name.length === 0 ||
    name.length > MAX_IFNAME ||
    !/^[A-Za-z0-9_.-]+$/.test(name) ||
    /^\.\.?$/.test(name)
  ) {
    throw new NetnsError(
      `interface name '${name}' must be 1-${MAX_IFNAME} characters of A-Z, a-z, 0-9, '_', '.' and '-'`,
    );
  }
  return name;
}

/** "10.0.0.1/24" → "10.0.0.1". */
export function addressOf(cidr: string): string {
  return cidr.split("/")[0]!;
}

/** `ip route replace` arguments: one gateway, or a multipath route with one `nexthop` per gateway. */
export function routeArgs(prefix: string, via: string | readonly string[]): string[] {
  const gateways = typeof via === "string" ? [via] : via;
  if (gateways.length === 0) throw new NetnsError(`route ${prefix}: give at least one gateway`);
  if (gateways.length === 1) return ["route", "replace", prefix, "via", gateways[0]!];
  return ["route", "replace", prefix, ...gateways.flatMap((g) => ["nexthop", "via", g])];
}

// ---- Commands ---------------------------------------------------------------------------------

export interface ExecOptions {
  /** Killed (with its process group) after this long; default 30 s. */
  timeoutMs?: number;
  /** Written to the command's standard input. */
  input?: string;
  /** Added to the environment. */
  env?: NodeJS.ProcessEnv;
  /** Sends SIGTERM to the command's process group when aborted: a command that stops cleanly on it still answers. */
  signal?: AbortSignal;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  /** Exit status; 128 + signal number when killed by a signal, 124 on timeout (as timeout(1)), 127 if it could not start. */
  code: number;
  timedOut: boolean;
}

/** Runs a command to completion, bounded in time; never rejects. */
export function execCommand(
  command: string,
  args: readonly string[],
  opts: ExecOptions = {},
): Promise<ExecResult> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise((resolve) => {
    // Its own process group, so a timeout also kills what the command started (a shell's children).
    const child = spawn(command, args, { detached: true, env: { ...process.env, ...opts.env } });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let settled = false;
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // already gone
      }
    };
    const onAbort = () => killGroup("SIGTERM");
    const settle = (code: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      resolve({ stdout, stderr, code: timedOut ? 124 : code, timedOut });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup("SIGKILL");
    }, timeoutMs);
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (err) => {
      stderr += err.message;
      settle(127);
    });
    child.on("close", (code, signal) => settle(code ?? 128 + (signal ? constants.signals[signal] : 0)));
    child.stdin.on("error", () => undefined); // a command that does not read its input
    child.stdin.end(opts.input ?? "");
  });
}

/**
 * Runs a command and returns its stdout; throws naming `where`, the command (`shown`, when the
 * real one is wrapped in `ip netns exec`) and its stderr.
 */
async function runChecked(
  where: string,
  command: string,
  args: readonly string[],
  opts?: ExecOptions,
  shown = [command, ...args].join(" "),
): Promise<string> {
  const r = await execCommand(command, args, opts);
  if (r.code !== 0) {
    const why = r.timedOut
      ? `timed out after ${(opts?.timeoutMs ?? 30_000) / 1000} s`
      : `failed (exit ${r.code})`;
    throw new NetnsError(`${where}: '${shown}' ${why}: ${r.stderr.trim() || r.stdout.trim()}`);
  }
  return r.stdout;
}

// ---- State, cleanup and reaping ---------------------------------------------------------------

export interface ProcessRecord {
  name: string;
  pid: number;
  /** A string the process's command line contains while it runs (guards against recycled pids). */
  marker: string;
  netns: string;
  logFile: string;
}

export interface LabState {
  id: string;
  name: string;
  ownerPid: number;
  /** The owner's start time, so a recycled owner pid does not keep a stale lab alive. */
  ownerStart?: string;
  /** Logs of the lab's processes; removed with the lab. */
  dir: string;
  /** Full `ip netns` names, recorded before they are created. */
  namespaces: string[];
  processes: ProcessRecord[];
}

/** Where lab state files live: beside the control planes' instances, so any run finds stale labs. */
export function labsRoot(): string {
  return join(dirname(instancesRoot()), "netns-labs");
}

export function readLabState(file: string): LabState | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as LabState;
  } catch {
    return undefined;
  }
}

function writeLabState(file: string, state: LabState): void {
  // Write then rename: a reaper never reads half a file.
  writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2));
  renameSync(`${file}.tmp`, file);
}

function startTimeOf(pid: number): string | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8")).startTime;
  } catch {
    return undefined;
  }
}

function ownerAlive(state: LabState): boolean {
  if (!runs(state.ownerPid, "")) return false;
  return state.ownerStart === undefined || startTimeOf(state.ownerPid) === state.ownerStart;
}

/** Pids of the processes inside a namespace (none if it does not exist). */
function namespacePids(netns: string): number[] {
  const r = spawnSync("ip", ["netns", "pids", netns], { encoding: "utf8", timeout: 10_000 });
  return r.status === 0 ? r.stdout.split(/\s+/).filter(Boolean).map(Number) : [];
}

/**
 * Kills what is left inside the lab's namespaces and deletes them, synchronously (exit handlers
 * can do nothing else). Deleting a namespace deletes its veths and bridges with it. Returns the
 * pids it killed.
 */
function removeNamespacesNow(state: LabState): number[] {
  return deleteNamespacesNow(state.namespaces, `netns lab ${state.id}`);
}

/**
 * Kills every process inside each namespace and deletes it, synchronously; `where` names the owner
 * in errors. Only for namespaces the caller made: every pid found in them is killed.
 */
export function deleteNamespacesNow(namespaces: readonly string[], where: string): number[] {
  const killed: number[] = [];
  for (const netns of namespaces) {
    for (const pid of namespacePids(netns)) {
      killNow(pid, "");
      killed.push(pid);
    }
    const r = spawnSync("ip", ["netns", "delete", netns], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0 && !/No such file/.test(r.stderr)) {
      throw new NetnsError(`${where}: 'ip netns delete ${netns}' failed: ${r.stderr.trim()}`);
    }
  }
  return killed;
}

/** Where a destroyed lab's logs are kept, when asked (e.g. in CI, to read after a failed test). */
const KEEP_LOGS = process.env.PORTABLE_LB_KEEP_LAB_LOGS;

function removeFilesNow(state: LabState, stateFile: string): void {
  if (KEEP_LOGS && existsSync(state.dir))
    cpSync(state.dir, join(KEEP_LOGS, `${state.name}-${state.id}`), {
      recursive: true,
      filter: (src) => !lstatSync(src).isSocket(),
    });
  rmSync(state.dir, { recursive: true, force: true });
  rmSync(stateFile, { force: true });
}

export async function stopRecorded(p: ProcessRecord, graceMs: number): Promise<void> {
  // stopProcess would take a process caught mid-exec for gone: let the exec finish first.
  await waitUntil(() => commandLine(p.pid) !== "", 1_000, 5);
  await stopProcess(p.pid, p.marker, graceMs);
}

/** For process-exit handlers: kills the lab's processes, deletes its namespaces and files at once. */
function destroyLabNow(state: LabState, stateFile: string): void {
  for (const p of state.processes) killNow(p.pid, p.marker);
  removeNamespacesNow(state);
  removeFilesNow(state, stateFile);
}

/** Stops the processes (SIGTERM, newest first), then removes namespaces and files. Returns pids it stopped. */
async function destroyLab(state: LabState, stateFile: string): Promise<number[]> {
  const stopped = state.processes.filter((p) => runs(p.pid, p.marker)).map((p) => p.pid);
  for (const p of [...state.processes].reverse()) await stopRecorded(p, 5_000);
  const killed = removeNamespacesNow(state);
  await waitUntil(() => killed.every((pid) => !runs(pid, "")), 5_000, 20);
  removeFilesNow(state, stateFile);
  return [...stopped, ...killed];
}

/**
 * Destroys labs under `root` whose owner process has exited (a test run killed before its
 * cleanup): their processes and namespaces. Returns one line per lab it removed.
 */
export async function reapStaleLabs(root: string = labsRoot()): Promise<string[]> {
  const lines: string[] = [];
  const files = existsSync(root) ? readdirSync(root).filter((f) => f.endsWith(".json")) : [];
  for (const file of files) {
    const path = join(root, file);
    const state = readLabState(path);
    if (!state || ownerAlive(state)) continue;
    const pids = await destroyLab(state, path);
    lines.push(
      `netns lab: removed stale lab ${state.id} ('${state.name}', owner pid ${state.ownerPid} gone): ` +
        `namespaces ${state.namespaces.join(", ") || "none"}` +
        (pids.length ? `; stopped pids ${pids.join(", ")}` : ""),
    );
  }
  return lines;
}

/**
 * The process that really exits. Jest hands test files a copy of `process` whose "exit" event
 * never fires; code run in the main context sees the host's.
 */
function hostProcess(): NodeJS.Process {
  return runInThisContext("process") as NodeJS.Process;
}

// ---- The lab ------------------------------------------------------------------------------------

export interface LabOptions {
  /** Folder for state files; default `labsRoot()`. */
  root?: string;
  /** The lab counts as stale once this process is gone; default this process. */
  ownerPid?: number;
}

export interface NamespaceOptions {
  /** Turn on net.ipv4.ip_forward (routers, LB nodes). */
  forwarding?: boolean;
}

/** One end of a link, inside a namespace. */
export interface Iface {
  ns: LabNamespace;
  name: string;
  /** Addresses with prefix length, as given. */
  addresses: string[];
  /** The first address without prefix length, if any. */
  ip?: string;
}

export interface LinkOptions {
  /** Address(es) with prefix length for the end in `a` / `b`, e.g. "10.0.0.1/24". */
  a?: string | string[];
  b?: string | string[];
  /** Interface names (≤ 15 characters); default `v<labid><n>`. */
  names?: { a?: string; b?: string };
}

export interface Bridge {
  ns: LabNamespace;
  name: string;
}

export interface SpawnOptions {
  /** Default: `<lab dir>/<namespace>-<name>.log`, removed with the lab. */
  logFile?: string;
  /** Added to the environment. */
  env?: NodeJS.ProcessEnv;
  /**
   * A string in the process's command line while it runs; default `command`. Give one if the
   * program rewrites its argv (stray processes are still killed by namespace on destroy).
   */
  marker?: string;
  /** Resolve only once a TCP listener on this port exists in the namespace. */
  waitForPort?: number;
  /** Default 30 s. */
  readyTimeoutMs?: number;
}

export class NetnsLab {
  readonly id: string;
  readonly name: string;
  readonly stateFile: string;
  readonly #state: LabState;
  readonly #namespaces = new Map<string, LabNamespace>();
  readonly #onExit: () => void;
  #interfaces = 0;
  #destroyed: Promise<void> | undefined;

  private constructor(state: LabState, stateFile: string) {
    this.#state = state;
    this.id = state.id;
    this.name = state.name;
    this.stateFile = stateFile;
    this.#onExit = () => {
      try {
        destroyLabNow(this.#state, this.stateFile);
      } catch (err) {
        // Exiting anyway: say what is left; the next NetnsLab.create reaps it.
        console.error(String(err));
      }
    };
  }

  /** A new, empty lab. Reaps stale labs under the same root first (their lines go to console.warn). */
  static async create(name = "lab", opts: LabOptions = {}): Promise<NetnsLab> {
    if (process.getuid?.() !== 0) throw new NetnsError("netns lab: network namespaces need root");
    requireCommand("ip", IP_FIX);
    const root = opts.root ?? labsRoot();
    mkdirSync(root, { recursive: true });
    for (const line of await reapStaleLabs(root)) console.warn(line);

    const taken = (await runChecked("netns lab", "ip", ["netns", "list"])).split("\n");
    let id = newLabId();
    for (let i = 0; existsSync(join(root, `${id}.json`)) || taken.some((n) => n.startsWith(`${id}-`)); i++) {
      if (i >= 20) throw new NetnsError(`netns lab: no free lab id under ${root}`);
      id = newLabId();
    }
    const ownerPid = opts.ownerPid ?? process.pid;
    const state: LabState = {
      id,
      name,
      ownerPid,
      ownerStart: startTimeOf(ownerPid),
      dir: join(root, id),
      namespaces: [],
      processes: [],
    };
    mkdirSync(state.dir, { recursive: true });
    const lab = new NetnsLab(state, join(root, `${id}.json`));
    lab.#save();
    hostProcess().once("exit", lab.#onExit);
    return lab;
  }

  /** Folder for the lab's logs (removed by destroy). */
  get dir(): string {
    return this.#state.dir;
  }

  get namespaces(): LabNamespace[] {
    return [...this.#namespaces.values()];
  }

  /** Creates namespace `<labid>-<name>` with `lo` up. */
  async namespace(name: string, opts: NamespaceOptions = {}): Promise<LabNamespace> {
    this.#assertLive();
    const netns = namespaceName(this.id, name);
    if (this.#namespaces.has(name))
      throw new NetnsError(`netns lab ${this.id}: namespace '${name}' exists already`);
    // Recorded before it exists: a run killed in between still leaves it to the reaper.
    this.#state.namespaces.push(netns);
    this.#save();
    const ns = new LabNamespace(name, netns, this.#state.dir, (record) => {
      this.#state.processes.push(record);
      this.#save();
    });
    this.#namespaces.set(name, ns);
    await runChecked(`netns lab ${this.id}`, "ip", ["netns", "add", netns]);
    await ns.ip("link", "set", "lo", "up");
    if (opts.forwarding) await ns.sysctl("net.ipv4.ip_forward", "1");
    return ns;
  }

  /** A veth pair between two namespaces, both ends up, with the given addresses. */
  async link(a: LabNamespace, b: LabNamespace, opts: LinkOptions = {}): Promise<{ a: Iface; b: Iface }> {
    this.#assertLive();
    const nameA = checkInterfaceName(opts.names?.a ?? this.#nextInterface());
    const nameB = checkInterfaceName(opts.names?.b ?? this.#nextInterface());
    // Created directly inside the namespaces: never a name clash with the host's interfaces.
    await a.ip("link", "add", nameA, "type", "veth", "peer", "name", nameB, "netns", b.netns);
    return { a: await a.configure(nameA, opts.a), b: await b.configure(nameB, opts.b) };
  }

  /** A bridge (an L2 segment) inside `ns`, up, with an optional address of `ns` on it. */
  async bridge(ns: LabNamespace, name: string, address?: string | string[]): Promise<Bridge> {
    this.#assertLive();
    await ns.ip("link", "add", checkInterfaceName(name), "type", "bridge");
    await ns.configure(name, address);
    return { ns, name };
  }

  /** Plugs `host` into a bridge with a veth; returns the host's end, up, with the given address(es). */
  async attach(
    bridge: Bridge,
    host: LabNamespace,
    address?: string | string[],
    name?: string,
  ): Promise<Iface> {
    const { a: port, b: end } = await this.link(bridge.ns, host, { b: address, names: { b: name } });
    await bridge.ns.ip("link", "set", port.name, "master", bridge.name);
    return end;
  }

  /**
   * Stops every process the lab started (SIGTERM, then SIGKILL; newest first), kills anything
   * else left in its namespaces, deletes the namespaces (and with them every veth and bridge),
   * and removes the state file and logs. Idempotent.
   */
  destroy(): Promise<void> {
    this.#destroyed ??= (async () => {
      hostProcess().off("exit", this.#onExit);
      await destroyLab(this.#state, this.stateFile);
    })();
    return this.#destroyed;
  }

  #nextInterface(): string {
    return interfaceName(this.id, ++this.#interfaces);
  }

  #save(): void {
    writeLabState(this.stateFile, this.#state);
  }

  #assertLive(): void {
    if (this.#destroyed) throw new NetnsError(`netns lab ${this.id} is destroyed`);
  }
}

/** A process a lab started inside one of its namespaces. */
export class LabProcess {
  readonly name: string;
  readonly pid: number;
  readonly marker: string;
  readonly logFile: string;
  readonly #record: ProcessRecord;

  constructor(record: ProcessRecord) {
    this.#record = record;
    this.name = record.name;
    this.pid = record.pid;
    this.marker = record.marker;
    this.logFile = record.logFile;
  }

  running(): boolean {
    return runs(this.pid, this.marker);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it is gone. */
  stop(graceMs = 5_000): Promise<void> {
    return stopRecorded(this.#record, graceMs);
  }

  lastLines(n = 20): string {
    return lastLines(this.logFile, n);
  }
}

/** A host of the lab: one network namespace. */
export class LabNamespace {
  /** The short name given to `lab.namespace`. */
  readonly name: string;
  /** The `ip netns` name, `<labid>-<name>`. */
  readonly netns: string;
  readonly #logDir: string;
  readonly #track: (record: ProcessRecord) => void;

  constructor(name: string, netns: string, logDir: string, track: (record: ProcessRecord) => void) {
    this.name = name;
    this.netns = netns;
    this.#logDir = logDir;
    this.#track = track;
  }

  /** Runs a command inside the namespace; never rejects (see `code`, `timedOut`). */
  exec(command: string, args: readonly string[] = [], opts?: ExecOptions): Promise<ExecResult> {
    return execCommand("ip", ["netns", "exec", this.netns, command, ...args], opts);
  }

  /** Runs a command inside the namespace and returns its stdout; throws on failure with namespace, command and stderr. */
  run(command: string, args: readonly string[] = [], opts?: ExecOptions): Promise<string> {
    return runChecked(
      this.netns,
      "ip",
      ["netns", "exec", this.netns, command, ...args],
      opts,
      [command, ...args].join(" "),
    );
  }

  /** `ip <args>` in the namespace (e.g. `ns.ip("-j", "route", "show")`); returns stdout. */
  ip(...args: string[]): Promise<string> {
    return runChecked(this.netns, "ip", ["-n", this.netns, ...args]);
  }

  /** Reads a sysctl of the namespace, or sets it when `value` is given; returns the value. */
  async sysctl(key: string, value?: string): Promise<string> {
    const args = value === undefined ? ["-n", key] : ["-qw", `${key}=${value}`];
    await this.run("sysctl", args);
    return value ?? (await this.run("sysctl", ["-n", key])).trim();
  }

  async addAddress(address: string, dev: string): Promise<void> {
    await this.ip("address", "add", address, "dev", dev);
  }

  /** `ip route replace`: via one gateway, or a multipath route when given several. `prefix` may be "default". */
  async route(prefix: string, via: string | readonly string[]): Promise<void> {
    await this.ip(...routeArgs(prefix, via));
  }

  async defaultRoute(via: string | readonly string[]): Promise<void> {
    await this.route("default", via);
  }

  /** Accepts traffic to `prefix` as local (a VIP), e.g. `ip route replace local 10.1.1.10/32 dev lo`. */
  async localRoute(prefix: string, dev = "lo"): Promise<void> {
    await this.ip("route", "replace", "local", prefix, "dev", dev);
  }

  /** Whether a TCP socket listens on `port` in the namespace. */
  async listening(port: number): Promise<boolean> {
    return (await this.run("ss", ["-Hltn", `sport = :${port}`])).trim() !== "";
  }

  /**
   * Starts a long-running process inside the namespace (own process group, output to a log),
   * tracked by pid and stopped by `lab.destroy()`. With `waitForPort`, resolves once it listens,
   * and throws with its last log lines if it exits or does not listen in time.
   */
  async spawn(
    name: string,
    command: string,
    args: readonly string[] = [],
    opts: SpawnOptions = {},
  ): Promise<LabProcess> {
    const logFile = opts.logFile ?? join(this.#logDir, `${this.name}-${name}.log`);
    const record: ProcessRecord = {
      name,
      // `ip netns exec` execs the command, so this pid becomes the command itself.
      pid: startDaemon({
        name,
        command: "ip",
        args: ["netns", "exec", this.netns, command, ...args],
        logFile,
        env: { ...process.env, ...opts.env },
      }),
      marker: opts.marker ?? command,
      netns: this.netns,
      logFile,
    };
    this.#track(record);
    const proc = new LabProcess(record);
    const port = opts.waitForPort;
    if (port !== undefined) {
      const timeoutMs = opts.readyTimeoutMs ?? 30_000;
      const ready = await waitUntil(
        async () => !proc.running() || (await this.listening(port)),
        timeoutMs,
        100,
      );
      if (!ready || !proc.running()) {
        await proc.stop();
        const what = ready
          ? "exited during start-up"
          : `did not listen on port ${port} within ${timeoutMs / 1000} s`;
        throw new NetnsError(
          `${this.netns}: ${name} (${command}) ${what}; last lines of ${record.logFile}:\n${proc.lastLines()}`,
        );
      }
    }
    return proc;
  }

  /** Brings an interface up with its addresses; the lab's link helpers use it. */
  async configure(dev: string, address?: string | string[]): Promise<Iface> {
    const addresses = address === undefined ? [] : typeof address === "string" ? [address] : address;
    for (const a of addresses) await this.addAddress(a, dev);
    await this.ip("link", "set", dev, "up");
    return {
      ns: this,
      name: dev,
      addresses,
      ip: addresses[0] === undefined ? undefined : addressOf(addresses[0]),
    };
  }
}
