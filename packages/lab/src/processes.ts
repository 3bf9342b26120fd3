// Daemons the tests start: spawned in their own process group with output to a log file, tracked by
// pid, and stopped by pid (after checking the pid still runs the same command line).
import { spawn, spawnSync } from "node:child_process";
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { parseProcStat } from "./procStat.ts";

export interface DaemonSpec {
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
}

/** Where `command` is on PATH, or a clear error naming the fix. */
export function requireCommand(command: string, fix: string): string {
  const found = spawnSync("sh", ["-c", `command -v "${command}"`], { encoding: "utf8" });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path) throw new Error(`${command} is not on PATH: ${fix}`);
  return path;
}

export function startDaemon(spec: DaemonSpec): number {
  const log = openSync(spec.logFile, "a");
  try {
    const child = spawn(spec.command, spec.args, {
      detached: true,
      stdio: ["ignore", log, log],
      env: spec.env ?? process.env,
    });
    if (child.pid === undefined) throw new Error(`${spec.name} (${spec.command}) could not be started`);
    child.unref();
    return child.pid;
  } finally {
    closeSync(log);
  }
}

/** The process's command line, or undefined if it no longer runs (zombies count as gone). */
export function commandLine(pid: number): string | undefined {
  try {
    if (parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8")).state === "Z") return undefined;
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return undefined;
  }
}

/**
 * True while `pid` runs a command line containing `marker` (guards against recycled pids). A
 * process in the middle of exec (`ip netns exec` becoming the real command) reads an empty
 * command line for an instant: that counts as running too.
 */
export function runs(pid: number, marker: string): boolean {
  const line = commandLine(pid);
  return line !== undefined && (line === "" || line.includes(marker));
}

/** Polls `check` until it returns true or `timeoutMs` passes; returns whether it succeeded. */
export async function waitUntil(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 100,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopProcess(pid: number, marker: string, graceMs: number): Promise<void> {
  if (!runs(pid, marker)) return;
  signal(pid, "SIGTERM");
  if (await waitUntil(() => !runs(pid, marker), graceMs, 50)) return;
  signal(pid, "SIGKILL");
  await waitUntil(() => !runs(pid, marker), 5_000, 50);
}

/** The pid of a running process whose command line includes `marker`, if any. */
export function findByMarker(marker: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (/^\d+$/.test(entry) && (commandLine(Number(entry)) ?? "").includes(marker)) return Number(entry);
  }
  return undefined;
}

/** Synchronous SIGKILL for process-exit handlers, where nothing asynchronous runs any more. */
export function killNow(pid: number, marker: string): void {
  if (runs(pid, marker)) signal(pid, "SIGKILL");
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

export function lastLines(file: string, n: number): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-n).join("\n");
  } catch {
    return "(no log)";
  }
}
