// The BGP speaker container's process: waits for the controller's first BIRD config, checks it with
// BIRD's own parser, then runs BIRD in the foreground, so the container lives and dies with it. The
// controller owns the config and reloads BIRD through the control socket; this starts and stops
// the daemon, and its watchdog (leaseWatchdog.ts) withdraws every VIP when the controller stops
// renewing its announcement lease.
import { BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { BirdControl } from "../bgp/birdControl.ts";
import { writeFileAtomic } from "../common/atomicFile.ts";
import { CommandError, run } from "../dataplane/exec.ts";
import { LeaseWatchdog } from "./leaseWatchdog.ts";

export interface SpeakerOptions {
  /** BIRD's config, written by the controller; the announcement lease and the gate are beside it. */
  config: string;
  /** BIRD's control socket (the controller and the liveness probe use it). */
  socket: string;
  /** How long to wait for the first config before giving up (the container then restarts). */
  waitMs: number;
  log: Logger;
}

const POLL_MS = 200;
/** How often a wait says that it is still waiting. */
const LOG_EVERY_MS = 10_000;

/** Exit codes of the speaker: a clean stop, no config or BIRD failed, and a config BIRD refuses. */
export const SPEAKER_EXIT = { ok: 0, failed: 1, invalidConfig: 2 } as const;

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Resolves true once `file` exists, false when `waitMs` passed or `stop` fired first. */
async function waitForFile(file: string, waitMs: number, log: Logger, stop: AbortSignal): Promise<boolean> {
  const started = Date.now();
  let nextLog = started;
  while (!isFile(file)) {
    const waited = Date.now() - started;
    if (waited >= waitMs) return false;
    if (Date.now() >= nextLog) {
      log.info({ file, waitedS: Math.round(waited / 1000) }, "waiting for the controller's BIRD config");
      nextLog += LOG_EVERY_MS;
    }
    try {
      await sleep(POLL_MS, undefined, { signal: stop });
    } catch {
      return false; // stopped
    }
  }
  return true;
}

/**
 * Runs the speaker until BIRD exits; returns the process's exit code. `stop` (SIGTERM/SIGINT) ends
 * a wait at once, or stops BIRD with SIGTERM, its clean shutdown (SIGINT would kill it outright).
 */
export async function runSpeaker(o: SpeakerOptions, stop: AbortSignal): Promise<number> {
  // Before BIRD first reads its config: the gate it includes must already hold the verdict, and
  // this speaker's id must be there for the controller to name once it has configured this BIRD.
  const runDir = dirname(o.config);
  const instance = randomUUID();
  await writeFileAtomic(join(runDir, BIRD_RUN_FILES.speaker), `${instance}\n`, "speaker");
  const watchdog = new LeaseWatchdog({
    runDir,
    instance,
    bird: new BirdControl(o.socket),
    log: o.log.child({ part: "watchdog", speaker: instance }),
  });
  await watchdog.start();
  try {
    return await superviseBird(o, stop, watchdog);
  } finally {
    watchdog.stop();
  }
}

async function superviseBird(o: SpeakerOptions, stop: AbortSignal, watchdog: LeaseWatchdog): Promise<number> {
  if (!(await waitForFile(o.config, o.waitMs, o.log, stop))) {
    if (stop.aborted) {
      o.log.info({ reason: String(stop.reason) }, "stopped before BIRD started");
      return SPEAKER_EXIT.ok;
    }
    o.log.fatal(
      { file: o.config },
      `no BIRD config after ${o.waitMs / 1000} s; is the controller running and synced with the API server?`,
    );
    return SPEAKER_EXIT.failed;
  }
  try {
    await run(["bird", "-p", "-c", o.config]);
  } catch (err) {
    const detail = err instanceof CommandError ? err.stderr.trim() || err.message : String(err);
    o.log.fatal({ file: o.config }, `BIRD refused the config ${o.config}: ${detail}`);
    return SPEAKER_EXIT.invalidConfig;
  }
  if (stop.aborted) return SPEAKER_EXIT.ok;

  const child = spawn("bird", ["-f", "-c", o.config, "-s", o.socket], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  const onStop = () => child.kill("SIGTERM");
  stop.addEventListener("abort", onStop, { once: true });
  watchdog.birdStarted();
  o.log.info({ pid: child.pid, config: o.config, socket: o.socket }, "BIRD started");
  return new Promise((resolve) => {
    child.once("error", (err) => {
      o.log.fatal({ err }, "BIRD could not be started");
      resolve(SPEAKER_EXIT.failed);
    });
    child.once("exit", (code, signal) => {
      stop.removeEventListener("abort", onStop);
      const clean = code === 0;
      if (clean) o.log.info({ requested: stop.aborted }, "BIRD exited");
      else o.log.error({ code, signal }, "BIRD exited unexpectedly");
      resolve(clean ? SPEAKER_EXIT.ok : SPEAKER_EXIT.failed);
    });
  });
}
