// The speaker's watchdog over the controller: BIRD announces the VIPs only while the controller's
// announcement lease (bgp/announcementLease.ts) is renewed and its process is there. When the lease
// stops changing for ANNOUNCEMENT_LEASE.ttlMs (the controller hangs), is revoked or is missing, or
// the controller's presence socket closes (its process died: bgp/controllerPresence.ts), the
// watchdog closes the gate: it writes `disabled yes;` into the file the config's `protocol static vips`
// includes, then disables that protocol (`birdc disable vips`), which withdraws every VIP at once.
// A renewal opens it the same way. The file makes the verdict survive the controller's
// reconfigures (a plain `birdc disable` does not: BIRD 2 brings a disabled protocol back on
// `configure` unless its config says `disabled`), and it is in place before BIRD first reads its
// config, so a speaker that starts without a live controller announces nothing at all.
import { ANNOUNCEMENT_LEASE, BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { leaseSchema } from "../bgp/announcementLease.ts";
import type { BirdControl } from "../bgp/birdControl.ts";
import { ControllerPresenceWatch } from "../bgp/controllerPresence.ts";
import { writeFileAtomic } from "../common/atomicFile.ts";

/** The lease as the watchdog last read it, and when (its monotonic clock) that content appeared. */
export interface LeaseSighting {
  content: string | undefined;
  /** Undefined for the content found at start: a lease left from before is no renewal. */
  changedAtMs: number | undefined;
}

/** The sighting after reading `content` (undefined: no file) at `nowMs`. */
export function sight(
  prev: LeaseSighting | undefined,
  content: string | undefined,
  nowMs: number,
): LeaseSighting {
  if (prev === undefined) return { content, changedAtMs: undefined };
  if (content === prev.content) return prev;
  return { content, changedAtMs: nowMs };
}

export interface Verdict {
  announce: boolean;
  why: string;
}

/**
 * Whether the BIRD of speaker `instance` may announce, given what the watchdog has seen of the
 * lease and whether the controller's process is there (its presence socket).
 */
export function verdict(
  s: LeaseSighting,
  nowMs: number,
  instance: string,
  controllerPresent: boolean,
  ttlMs: number = ANNOUNCEMENT_LEASE.ttlMs,
): Verdict {
  if (!controllerPresent)
    return {
      announce: false,
      why: "the controller's process is gone (its presence socket closed or is not there)",
    };
  if (s.content === undefined)
    return { announce: false, why: "no announcement lease (the controller has not vouched yet)" };
  let lease;
  try {
    lease = leaseSchema.parse(JSON.parse(s.content));
  } catch (err) {
    return { announce: false, why: `unreadable announcement lease: ${(err as Error).message}` };
  }
  if (!lease.announce)
    return {
      announce: false,
      why: `announcement lease revoked by the ${lease.holder}: ${lease.reason ?? "no reason given"}`,
    };
  if (lease.speaker !== instance)
    return {
      announce: false,
      why: `the controller has not configured this speaker's BIRD yet (its lease names speaker ${lease.speaker ?? "none"})`,
    };
  if (s.changedAtMs === undefined)
    return { announce: false, why: "announcement lease not renewed since the speaker started" };
  const age = nowMs - s.changedAtMs;
  if (age > ttlMs)
    return {
      announce: false,
      why: `announcement lease not renewed for ${Math.round(age)} ms (the controller died or hangs)`,
    };
  return { announce: true, why: "announcement lease renewed" };
}

/** The gate file's content for a verdict (BIRD reads it inside `protocol static vips`). */
export function gateFile(v: Verdict): string {
  return `# Written by the speaker's watchdog: ${v.why}.\ndisabled ${v.announce ? "no" : "yes"};\n`;
}

export interface LeaseWatchdogOptions {
  /** BIRD's run folder: the lease is read, and the gate written, next to BIRD's config. */
  runDir: string;
  /** This speaker's id (BIRD_RUN_FILES.speaker): only renewals naming it open the gate. */
  instance: string;
  bird: BirdControl;
  log: Logger;
  ttlMs?: number;
  checkMs?: number;
  /** A monotonic clock in ms. */
  now?: () => number;
}

export class LeaseWatchdog {
  private readonly o: LeaseWatchdogOptions;
  private readonly now: () => number;
  private sighting: LeaseSighting | undefined;
  private gate: Verdict | undefined;
  /** BIRD runs and has not been told the current verdict through its socket yet. */
  private birdBehind = false;
  private birdRuns = false;
  private birdFailing = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly controller: ControllerPresenceWatch;
  private checking: Promise<unknown> = Promise.resolve();

  constructor(o: LeaseWatchdogOptions) {
    this.o = o;
    this.now = o.now ?? (() => performance.now());
    this.controller = new ControllerPresenceWatch(o.runDir, (present) => {
      // A lease seen before (re)connecting may be a dead controller's last: only a renewal after it counts.
      if (present) this.sighting = undefined;
      else void this.check().catch((err: unknown) => this.o.log.error({ err }, "watchdog check failed"));
    });
  }

  /** The gate as it stands (undefined before the first check). */
  get announcing(): boolean | undefined {
    return this.gate?.announce;
  }

  /** The first check (the gate file is in place once it resolves), then one every checkMs. */
  async start(): Promise<void> {
    await this.check();
    const tick = () => {
      if (this.stopped) return;
      const next = () =>
        void this.check()
          .catch((err: unknown) => this.o.log.error({ err }, "watchdog check failed; checking again"))
          .finally(tick);
      this.timer = setTimeout(next, this.o.checkMs ?? ANNOUNCEMENT_LEASE.checkMs);
    };
    tick();
  }

  /**
   * BIRD started: it read the gate file as it was then, which a check may have changed since, so
   * the current verdict goes through its socket too (again each check until BIRD answers).
   */
  birdStarted(): void {
    this.birdRuns = true;
    this.birdBehind = true;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.controller.stop();
  }

  /** Reads the lease and, when the verdict changed or BIRD has not heard it, applies it (one at a time). */
  check(): Promise<void> {
    const next = this.checking.then(() => this.checkOnce());
    this.checking = next.catch(() => undefined);
    return next;
  }

  private async checkOnce(): Promise<void> {
    await this.controller.ensure();
    const content = await readFile(join(this.o.runDir, BIRD_RUN_FILES.lease), "utf8").catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code !== "ENOENT") this.o.log.warn({ err }, "cannot read the announcement lease");
        return undefined;
      },
    );
    const now = this.now();
    this.sighting = sight(this.sighting, content, now);
    const v = verdict(this.sighting, now, this.o.instance, this.controller.present, this.o.ttlMs);
    if (v.announce !== this.gate?.announce) {
      await writeFileAtomic(join(this.o.runDir, BIRD_RUN_FILES.vipsGate), gateFile(v), "speaker");
      const first = this.gate === undefined;
      this.gate = v;
      this.birdBehind = this.birdRuns;
      const lastRenewal = this.sighting.changedAtMs;
      const detail = {
        why: v.why,
        ...(lastRenewal !== undefined && { sinceRenewalMs: Math.round(now - lastRenewal) }),
      };
      if (v.announce) this.o.log.info(detail, "announcing the VIPs: the controller renews its lease");
      else if (first) this.o.log.info(detail, "holding every VIP back until the controller renews its lease");
      else this.o.log.warn(detail, "withdrawing every VIP");
    }
    if (this.birdBehind) await this.tellBird(this.gate, now);
  }

  private async tellBird(v: Verdict, decidedAt: number): Promise<void> {
    const command = v.announce ? "enable" : "disable";
    try {
      const answer = await this.o.bird.run([command, "vips"]);
      this.birdBehind = false;
      this.birdFailing = false;
      this.o.log.info(
        { answer: answer.split("\n").slice(1).join(" ").trim(), tookMs: Math.round(this.now() - decidedAt) },
        `birdc ${command} vips`,
      );
    } catch (err) {
      // BIRD still starting (no socket yet): the next check tries again.
      if (!this.birdFailing) this.o.log.warn({ err }, `birdc ${command} vips failed; retrying every check`);
      this.birdFailing = true;
    }
  }
}
