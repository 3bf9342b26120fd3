// The controller's announcement lease: a file in BIRD's run folder (BIRD_RUN_FILES.lease) that the
// controller rewrites every ANNOUNCEMENT_LEASE.renewMs while it vouches for what BIRD announces.
// The speaker's watchdog (speaker/leaseWatchdog.ts) withdraws every VIP once the file stops
// changing (the controller died or hangs) or says to (revoked: the pod drains). Change, not the
// time written in it, is what counts: the two processes need no common clock.
import { ANNOUNCEMENT_LEASE, BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { Counter, Gauge, type Registry } from "prom-client";
import { z } from "zod";
import { writeFileAtomic } from "../common/atomicFile.ts";

export const leaseSchema = z.object({
  /** False once revoked: withdraw everything, whatever follows. */
  announce: z.boolean(),
  /** Who wrote it: the controller, or the speaker's preStop when the controller did not answer. */
  holder: z.string(),
  /** The speaker instance (BIRD_RUN_FILES.speaker) whose BIRD holds what the controller vouches for. */
  speaker: z.string().optional(),
  /** Counts the holder's writes, so each one differs from the last. */
  renewal: z.number().int().nonnegative(),
  /** When it was written, for people reading it (the watchdog does not compare clocks). */
  at: z.string(),
  reason: z.string().optional(),
});
export type Lease = z.infer<typeof leaseSchema>;

export interface AnnouncementLeaseOptions {
  /** BIRD's run folder, shared with the speaker container. */
  runDir: string;
  holder: "controller" | "preStop";
  /** The controller's metrics; none for the preStop hook. */
  registry?: Registry;
  log?: Logger;
}

export class AnnouncementLease {
  readonly file: string;
  private readonly o: AnnouncementLeaseOptions;
  private renewals = 0;
  private revoked = false;
  /** Writes land in call order, so a renewal begun before revoke() never lands after it. */
  private chain: Promise<unknown> = Promise.resolve();
  private failing = false;
  private readonly renewedAt: Gauge;
  private readonly failures: Counter;
  private readonly revokedGauge: Gauge;

  constructor(o: AnnouncementLeaseOptions) {
    this.o = o;
    this.file = join(o.runDir, BIRD_RUN_FILES.lease);
    const registers = o.registry ? [o.registry] : [];
    this.renewedAt = new Gauge({
      name: "portable_lb_announcement_lease_renewed_timestamp_seconds",
      help: `When the controller last renewed its announcement lease (every ${ANNOUNCEMENT_LEASE.renewMs} ms while it vouches for what BIRD announces)`,
      registers,
    });
    this.failures = new Counter({
      name: "portable_lb_announcement_lease_write_failures_total",
      help: "Failed writes of the announcement lease (the speaker withdraws every VIP when it is not renewed)",
      registers,
    });
    this.revokedGauge = new Gauge({
      name: "portable_lb_announcement_lease_revoked",
      help: "1 once the controller revoked its announcement lease (draining): the speaker announces nothing",
      registers,
    });
  }

  /**
   * The controller vouches for what the BIRD of speaker instance `speaker` announces now: call it
   * every ANNOUNCEMENT_LEASE.renewMs. Never rejects (a failure is logged and counted; the speaker
   * then withdraws); nothing once revoked.
   */
  renew(speaker: string): Promise<void> {
    if (this.revoked) return Promise.resolve();
    return this.write({ announce: true, speaker }).then(
      () => {
        this.renewedAt.setToCurrentTime();
        if (this.failing) this.o.log?.info({ file: this.file }, "announcement lease renewed again");
        this.failing = false;
      },
      (err: unknown) => {
        this.failures.inc();
        if (!this.failing)
          this.o.log?.error(
            { err, file: this.file },
            `cannot renew the announcement lease: the speaker withdraws every VIP ${ANNOUNCEMENT_LEASE.ttlMs} ms after the last renewal`,
          );
        this.failing = true;
      },
    );
  }

  /** Withdraw every VIP for good: the speaker's watchdog holds them back from its next check on. */
  revoke(reason: string): Promise<void> {
    this.revoked = true;
    this.revokedGauge.set(1);
    return this.write({ announce: false, reason });
  }

  private write(what: Pick<Lease, "announce" | "reason" | "speaker">): Promise<void> {
    const lease: Lease = {
      ...what,
      holder: this.o.holder,
      renewal: ++this.renewals,
      at: new Date().toISOString(),
    };
    const next = this.chain.then(() =>
      writeFileAtomic(this.file, `${JSON.stringify(lease)}\n`, this.o.holder),
    );
    this.chain = next.catch(() => undefined);
    return next;
  }
}

/** The id of the speaker that runs now (BIRD_RUN_FILES.speaker), or undefined before one started. */
export async function speakerInstance(runDir: string): Promise<string | undefined> {
  try {
    return (await readFile(join(runDir, BIRD_RUN_FILES.speaker), "utf8")).trim() || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
