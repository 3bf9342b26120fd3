import { ANNOUNCEMENT_LEASE, BIRD_RUN_FILES } from "@portable-lb/core/config/lbImage";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Registry } from "prom-client";
import { AnnouncementLease, leaseSchema } from "../bgp/announcementLease.ts";
import type { BirdControl } from "../bgp/birdControl.ts";
import { CommandError } from "../dataplane/exec.ts";
import { LeaseWatchdog, sight, verdict } from "./leaseWatchdog.ts";

const TTL = ANNOUNCEMENT_LEASE.ttlMs;
const lease = (announce: boolean, renewal = 1) =>
  JSON.stringify({
    announce,
    holder: "controller",
    renewal,
    at: "2026-01-01T00:00:00.000Z",
    ...(!announce && { reason: "draining" }),
  });

describe("verdict", () => {
  it("announces only while a lease that says so has changed within the TTL", () => {
    const start = sight(undefined, lease(true, 7), 0);
    // A lease found at start is no renewal: it may be a dead controller's last one.
    expect(verdict(start, 0)).toEqual({
      announce: false,
      why: "announcement lease not renewed since the speaker started",
    });
    const renewed = sight(start, lease(true, 8), 150);
    expect(verdict(renewed, 150 + TTL)).toEqual({ announce: true, why: "announcement lease renewed" });
    // The same content again is no renewal.
    expect(sight(renewed, lease(true, 8), 300)).toBe(renewed);
    expect(verdict(renewed, 151 + TTL)).toEqual({
      announce: false,
      why: `announcement lease not renewed for ${TTL + 1} ms (the controller died or hangs)`,
    });
  });

  it("withdraws at once on a revoked, missing or unreadable lease", () => {
    const seen = (content: string | undefined) => sight(sight(undefined, "x", 0), content, 10);
    expect(verdict(seen(lease(false)), 10)).toEqual({
      announce: false,
      why: "announcement lease revoked by the controller: draining",
    });
    expect(verdict(seen(undefined), 10).announce).toBe(false);
    expect(verdict(seen('{"announce":"yes"}'), 10)).toMatchObject({
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
    await l.renew();
    const first = read();
    await l.renew();
    expect(read()).toMatchObject({ announce: true, holder: "controller", renewal: first.renewal + 1 });
    await Promise.all([l.renew(), l.revoke("the pod is stopping"), l.renew()]);
    expect(read()).toMatchObject({ announce: false, reason: "the pod is stopping" });
    expect(readdirSync(dir)).toEqual([BIRD_RUN_FILES.lease]);
    expect(await registry.getSingleMetricAsString("portable_lb_announcement_lease_revoked")).toMatch(/ 1$/);
  });

  it("counts a failed renewal without rejecting", async () => {
    const registry = new Registry();
    const l = new AnnouncementLease({ runDir: join(dir, "missing"), holder: "controller", registry });
    await expect(l.renew()).resolves.toBeUndefined();
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
    new LeaseWatchdog({ runDir: dir, bird, log: pino({ level: "silent" }), now: () => now });

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
  });
});
