// Drives the speaker container's BIRD declaratively: renders the whole config for the VIPs to
// announce and the reflectors to export them to, has BIRD's own parser check it, swaps it in
// atomically and asks BIRD to reload (`birdc configure`, which changes only the routes and exports
// that differ; sessions stay up). Before BIRD runs, writing the file is enough: the speaker starts
// BIRD on the first config it finds. Whether BIRD announces at all is the speaker's watchdog's
// call, on the controller's announcement lease (announcementLease.ts), which drain revokes.
import { renderSpeakerBird, type SpeakerConfigInput } from "@portable-lb/core/bgp";
import { BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { existsSync } from "node:fs";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { run } from "../dataplane/exec.ts";
import type { AnnouncementLease } from "./announcementLease.ts";
import { BirdControl, birdNotRunning, waitUntilWithdrawn, type BirdClients } from "./birdControl.ts";

export interface SpeakerControlOptions {
  /** Everything but the VIPs and where they go (fixed for the pod's life). */
  base: Omit<SpeakerConfigInput, "vips" | "exportTo">;
  /** Holds bird.conf and BIRD's control socket bird.ctl (shared with the speaker container). */
  runDir: string;
  /** The controller's announcement lease: the controller renews it, drain revokes it first. */
  lease: AnnouncementLease;
  bird?: [string, ...string[]];
  clients?: BirdClients;
}

export class SpeakerControl {
  private readonly o: SpeakerControlOptions;
  readonly bird: BirdControl;
  readonly lease: AnnouncementLease;
  private applied: string | undefined;
  // Writes run one at a time, in call order; once draining, every write announces nothing.
  private chain: Promise<unknown> = Promise.resolve();
  private draining = false;
  private withdrawal: Promise<void> | undefined;

  constructor(o: SpeakerControlOptions) {
    this.o = o;
    this.lease = o.lease;
    this.bird = new BirdControl(join(o.runDir, BIRD_RUN_FILES.socket), o.clients);
  }

  get configFile(): string {
    return join(this.o.runDir, BIRD_RUN_FILES.config);
  }

  /**
   * Announces exactly `vips` (nothing once draining) on the sessions to the reflectors in
   * `exportTo` (default: all); resolves to whether the config changed. Rejects, changing nothing,
   * if `exportTo` names an address that is no reflector or BIRD's parser refuses the config.
   */
  announce(vips: string[], exportTo?: string[]): Promise<boolean> {
    const next = this.chain.then(() =>
      this.write(this.draining ? [] : vips, this.draining ? undefined : exportTo),
    );
    this.chain = next.catch(() => undefined);
    return next;
  }

  /**
   * preStop: withdraw every VIP for good and wait (bounded) until the withdrawals are out. The
   * controller's SIGTERM calls it again after preStop did: a later call shares the first one's
   * work, and only a failed withdrawal is tried again.
   */
  drain(timeoutMs: number): Promise<void> {
    this.withdrawal ??= this.withdraw(timeoutMs).catch((err: unknown) => {
      this.withdrawal = undefined;
      throw err;
    });
    return this.withdrawal;
  }

  private async withdraw(timeoutMs: number): Promise<void> {
    this.draining = true;
    // The lease first: from its next check on, the speaker's watchdog keeps the VIPs' protocol
    // disabled, whatever the config says. Then the fast path, which does not wait for that check,
    // for a write in flight or for a render, parse and reconfigure: disabling the protocol withdraws
    // the VIPs at once. The empty config keeps nothing to announce should anything enable it again.
    // Best effort, both: the empty config and the wait count.
    await this.lease.revoke("the pod is stopping").catch(() => undefined);
    if (this.bird.present) await this.bird.run(["disable", "vips"]).catch(() => undefined);
    await this.announce([]);
    await waitUntilWithdrawn(this.bird, timeoutMs);
  }

  private async write(vips: string[], exportTo: string[] | undefined): Promise<boolean> {
    const config = renderSpeakerBird({ ...this.o.base, vips, ...(exportTo && { exportTo }) });
    this.applied ??= existsSync(this.configFile) ? await readFile(this.configFile, "utf8") : undefined;
    if (config === this.applied) return false;
    const next = `${this.configFile}.next`;
    await writeFile(next, config, { mode: 0o600 });
    await run([...(this.o.bird ?? ["bird"]), "-p", "-c", next]);
    await rename(next, this.configFile);
    this.applied = config;
    await this.reload();
    return true;
  }

  /** BIRD not running (no socket, or a stale one) is fine: it reads the file when it starts. */
  private async reload(): Promise<void> {
    if (!this.bird.present) return;
    try {
      await this.bird.run(["configure"], 30_000);
    } catch (err) {
      if (!birdNotRunning(err)) throw err;
    }
  }
}
