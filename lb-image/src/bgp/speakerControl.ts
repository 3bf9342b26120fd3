// Drives the speaker container's BIRD declaratively: renders the whole config for the VIPs to
// announce, has BIRD's own parser check it, swaps it in atomically and asks BIRD to reload
// (`birdc configure`, which changes only the routes that differ). Before BIRD runs, writing the
// file is enough: the speaker starts BIRD on the first config it finds.
import { renderSpeakerBird, type SpeakerConfigInput } from "@portable-lb/core/bgp";
import { existsSync } from "node:fs";
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CommandError, run } from "../dataplane/exec.ts";

export interface SpeakerControlOptions {
  /** Everything but the VIPs (fixed for the pod's life). */
  base: Omit<SpeakerConfigInput, "vips">;
  /** Holds bird.conf and BIRD's control socket bird.ctl (shared with the speaker container). */
  runDir: string;
  bird?: [string, ...string[]];
  birdc?: [string, ...string[]];
}

/** "Routes: 0 imported, 2 exported, 0 preferred" → 2, per BGP session of `birdc show protocols all`. */
export function exportedPerSession(text: string): Map<string, number> {
  const out = new Map<string, number>();
  let session: string | undefined;
  for (const line of text.split("\n")) {
    const header = /^(reflector_\d+)\s+BGP\b/.exec(line);
    if (header) session = header[1];
    const routes = /Routes:\s+\d+ imported, (\d+) exported/.exec(line);
    if (session && routes) out.set(session, Number(routes[1]));
  }
  return out;
}

export class SpeakerControl {
  private readonly o: SpeakerControlOptions;
  private applied: string | undefined;
  // Writes run one at a time, in call order; once draining, every write announces nothing.
  private chain: Promise<unknown> = Promise.resolve();
  private draining = false;
  private withdrawal: Promise<void> | undefined;

  constructor(o: SpeakerControlOptions) {
    this.o = o;
  }

  get configFile(): string {
    return join(this.o.runDir, "bird.conf");
  }
  private get socket(): string {
    return join(this.o.runDir, "bird.ctl");
  }
  private birdc(...args: string[]): Promise<string> {
    return run([...(this.o.birdc ?? ["birdc"]), "-s", this.socket, ...args]);
  }

  /**
   * Announces exactly `vips` (nothing once draining); resolves to whether the config changed.
   * Rejects, changing nothing, if BIRD's parser refuses the config.
   */
  announce(vips: string[]): Promise<boolean> {
    const next = this.chain.then(() => this.write(this.draining ? [] : vips));
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
    // Fast path first: disabling the VIPs' protocol withdraws them at once, without waiting for a
    // write in flight or for a render, parse and reconfigure. The empty config then makes it last
    // (a reconfigure brings the protocol back, with nothing in it). Best effort: the write counts.
    if (existsSync(this.socket)) await this.birdc("disable", "vips").catch(() => undefined);
    await this.announce([]);
    await this.waitWithdrawn(timeoutMs);
  }

  private async write(vips: string[]): Promise<boolean> {
    const config = renderSpeakerBird({ ...this.o.base, vips });
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
    if (!existsSync(this.socket)) return;
    try {
      await this.birdc("configure");
    } catch (err) {
      if (!(
        err instanceof CommandError && /Unable to connect|Connection refused|No such file/.test(err.message)
      ))
        throw err;
    }
  }

  /** Resolves once no session exports any route (the withdrawals are out), or rejects after `timeoutMs`. */
  async waitWithdrawn(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!existsSync(this.socket)) return; // BIRD is not running: nothing is announced
      const exported = exportedPerSession(await this.birdc("show", "protocols", "all"));
      if ([...exported.values()].every((n) => n === 0)) return;
      if (Date.now() > deadline)
        throw new Error(`VIPs still exported after ${timeoutMs} ms: ${JSON.stringify([...exported])}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
