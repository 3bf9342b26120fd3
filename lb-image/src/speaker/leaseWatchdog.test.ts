import { ANNOUNCEMENT_LEASE, BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Registry } from "prom-client";
import { AnnouncementLease, leaseSchema } from "../bgp/announcementLease.ts";
import type { BirdControl } from "../bgp/birdControl.ts";
import { CommandError } from "../dataplane/exec.ts";
import { ControllerPresence } from "../bgp/controllerPresence.ts";
import { LeaseWatchdog, sight, verdict } from "./leaseWatchdog.ts";

const TTL = ANNOUNCEMENT_LEASE.ttlMs;
const SPEAKER = "speaker-a";
const lease = (announce: boolean, renewal = 1, speaker = SPEAKER) =>
  JSON.stringify({
    announce,
    holder: "controller",
    ...(announce && { speaker }),
    renewal,
    at: "2026-01-01T00:00:00.000Z",
    ...(!announce && { reason: "draining" }),
  });

describe("verdict", () => {
  it("announces only while a lease that says so has changed within the TTL", () => {
    const start = sight(undefined, lease(true, 7), 0);
    // A lease found at start is no renewal: it may be a dead controller's last one.
    expect(verdict(start, 0, SPEAKER, true)).toEqual({
      announce: false,
      why: "announcement lease not renewed since the speaker started",
    });
    const renewed = sight(start, lease(true, 8), 150);
    expect(verdict(renewed, 150 + TTL, SPEAKER, true)).toEqual({
      announce: true,
      why: "announcement lease renewed",
    });
    // The same content again is no renewal.
    expect(sight(renewed, lease(true, 8), 300)).toBe(renewed);
    expect(verdict(renewed, 151 + TTL, SPEAKER, true)).toEqual({
      announce: false,
      why: `announcement lease not renewed for ${TTL + 1} ms (the controller died or hangs)`,
    });
  });

  it("announces only for the speaker the lease names: a restarted one waits to be configured", () => {
    const renewed = sight(sight(undefined, "x", 0), lease(true, 2, "speaker-old"), 10);
    expect(verdict(renewed, 10, SPEAKER, true)).toEqual({
      announce: false,
      why: "the controller has not configured this speaker's BIRD yet (its lease names speaker speaker-old)",
    });
    expect(verdict(sight(renewed, lease(true, 3), 20), 20, SPEAKER, true).announce).toBe(true);
  });

  it("withdraws at once when the controller's process is gone, whatever the lease says", () => {
    const renewed = sight(sight(undefined, "x", 0), lease(true, 2), 10);
    expect(verdict(renewed, 10, SPEAKER, false)).toEqual({
      announce: false,
      why: "the controller's process is gone (its presence socket closed or is not there)",
    });
  });

  it("withdraws at once on a revoked, missing or unreadable lease", () => {
    const seen = (content: string | undefined) => sight(sight(undefined, "x", 0), content, 10);
    expect(verdict(seen(lease(false)), 10, SPEAKER, true)).toEqual({
      announce: false,
      why: "announcement lease revoked by the controller: draining",
    });
    expect(verdict(seen(undefined), 10, SPEAKER, true).announce).toBe(false);
    expect(verdict(seen('{"announce":"yes"}'), 10, SPEAKER, true)).toMatchObject({
      announce: false,
      why: expect.stringMatching(/^unreadable announcement lease: .*announce/s),
    });
  });
});

describe("AnnouncementLease", () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "lease-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("writes a different valid lease on each renewal, atomically, and nothing after revoke", async () => {
    const registry = new Registry();
    const l = new AnnouncementLease({ runDir: dir, holder: "controller", registry });
    const read = () => leaseSchema.parse(JSON.parse(readFileSync(join(dir, BIRD_RUN_FILES.lease), "utf8")));
    await l.renew(SPEAKER);
    const first = read();
    await l.renew(SPEAKER);
    expect(read()).toMatchObject({
      announce: true,
      holder: "controller",
      speaker: SPEAKER,
      renewal: first.renewal + 1,
    });
    await Promise.all([l.renew(SPEAKER), l.revoke("the pod is stopping"), l.renew(SPEAKER)]);
    expect(read()).toMatchObject({ announce: false, reason: "the pod is stopping" });
    expect(readdirSync(dir)).toEqual([BIRD_RUN_FILES.lease]);
    expect(await registry.getSingleMetricAsString("portable_lb_announcement_lease_revoked")).toMatch(/ 1$/);
  });

  it("counts a failed renewal without rejecting", async () => {
    const registry = new Registry();
    const l = new AnnouncementLease({ runDir: join(dir, "missing"), holder: "controller", registry });
    await expect(l.renew(SPEAKER)).resolves.toBeUndefined();
    expect(
      await registry.getSingleMetricAsString("portable_lb_announcement_lease_write_failures_total"),
    ).toMatch(/ 1$/);
  });
});

describe("LeaseWatchdog", () => {
  let dir: string;
  let now: number;
  let calls: string[];
  let failing: boolean;
  const bird = {
    run: (args: string[]) => {
      calls.push(args.join(" "));
      return failing
        ? Promise.reject(new CommandError("birdc failed: Unable to connect to server control socket", ""))
        : Promise.resolve(`BIRD 2.0.12 ready.\nvips: ${args[0]}d\n`);
    },
  } as unknown as BirdControl;
  const gate = () => readFileSync(join(dir, BIRD_RUN_FILES.vipsGate), "utf8").split("\n")[1];
  const writeLease = (content: string) => writeFileSync(join(dir, BIRD_RUN_FILES.lease), content);
  const watchdog = () =>
    new LeaseWatchdog({
      runDir: dir,
      instance: SPEAKER,
      bird,
      log: pino({ level: "silent" }),
      now: () => now,
    });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "watchdog-"));
    now = 0;
    calls = [];
    failing = false;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("closes the gate before BIRD starts when there is no lease, and tells BIRD once it runs", async () => {
    const w = watchdog();
    await w.check();
    expect(gate()).toBe("disabled yes;");
    expect(calls).toEqual([]);
    w.birdStarted();
    failing = true; // BIRD's socket is not up yet
    await w.check();
    failing = false;
    await w.check();
    expect(calls).toEqual(["disable vips", "disable vips"]);
    await w.check();
    expect(calls).toHaveLength(2);
  });

  it("opens on a renewal, withdraws once renewals stop for the TTL, and comes back on the next", async () => {
    const presence = await ControllerPresence.listen(dir);
    const w = watchdog();
    w.birdStarted();
    writeLease(lease(true, 1));
    await w.check(); // found at start: closed
    now = 100;
    writeLease(lease(true, 2));
    await w.check();
    expect({ gate: gate(), calls, announcing: w.announcing }).toEqual({
      gate: "disabled no;",
      calls: ["disable vips", "enable vips"],
      announcing: true,
    });
    now = 100 + TTL;
    await w.check();
    expect(w.announcing).toBe(true);
    now = 101 + TTL;
    await w.check();
    expect({ gate: gate(), last: calls.at(-1) }).toEqual({ gate: "disabled yes;", last: "disable vips" });
    now = 2_000;
    writeLease(lease(true, 3));
    await w.check();
    expect({ gate: gate(), last: calls.at(-1) }).toEqual({ gate: "disabled no;", last: "enable vips" });
    // Revoked: withdrawn at the next check, without waiting for the TTL.
    now = 2_050;
    writeLease(lease(false, 4));
    await w.check();
    expect({ gate: gate(), last: calls.at(-1), n: calls.length }).toEqual({
      gate: "disabled yes;",
      last: "disable vips",
      n: 5,
    });
    expect(existsSync(join(dir, `${BIRD_RUN_FILES.vipsGate}.speaker.tmp`))).toBe(false);
    w.stop();
    await presence.close();
  });
});

describe("LeaseWatchdog and the controller's process", () => {
  it("closes the gate the moment the controller's process is gone, and waits for a renewal after it is back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "presence-"));
    const calls: string[] = [];
    const bird = {
      run: (args: string[]) => {
        calls.push(args.join(" "));
        return Promise.resolve(`vips: ${args[0]}d\n`);
      },
    } as unknown as BirdControl;
    const leaseFile = join(dir, BIRD_RUN_FILES.lease);
    let presence = await ControllerPresence.listen(dir);
    const w = new LeaseWatchdog({ runDir: dir, instance: SPEAKER, bird, log: pino({ level: "silent" }) });
    w.birdStarted();
    await w.check();
    writeFileSync(leaseFile, lease(true, 1));
    await w.check();
    expect(w.announcing).toBe(true);
    // The controller dies: its socket closes, and the watchdog withdraws without waiting for a check.
    await presence.close();
    const until = Date.now() + 2_000;
    while (w.announcing && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    expect({ announcing: w.announcing, last: calls.at(-1) }).toEqual({
      announcing: false,
      last: "disable vips",
    });
    // A new controller: its predecessor's lease does not count, only a renewal of its own.
    presence = await ControllerPresence.listen(dir);
    await w.check();
    expect(w.announcing).toBe(false);
    writeFileSync(leaseFile, lease(true, 2));
    await w.check();
    expect(w.announcing).toBe(true);
    w.stop();
    await presence.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
