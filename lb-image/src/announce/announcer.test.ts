import { pino } from "pino";
import { Registry } from "prom-client";
import type { SkippedItem } from "../controller/desiredState.ts";
import { Announcer } from "./announcer.ts";
import type { NodeRouteProbeResult } from "./nodeRouteProbe.ts";

const RR = "172.16.0.1";
const until = async (cond: () => boolean, ms = 3_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 10));
  }
};

function rig(timing = {}) {
  const state = {
    route: true as boolean,
    ready: undefined as boolean | undefined,
    bfdUp: true,
    probeDelayMs: 0,
    failWrites: false,
    announced: [] as { vips: string[]; exportTo: string[] }[],
    renewals: 0,
    speaker: "speaker-1" as string | undefined,
    renewedFor: [] as string[],
    drained: 0,
    events: [] as SkippedItem[],
  };
  const announcer = new Announcer({
    pools: ["10.1.1.0/24"],
    reflectors: [RR],
    podIp: "10.244.1.5",
    nodeIp: "192.168.1.11",
    nodeAgentPort: 9152,
    pod: { object: "ns/lb-1", kind: "Pod", uid: "uid-1" },
    target: {
      announce: (vips, exportTo) => {
        if (state.failWrites) return Promise.reject(new Error("bird -p refused it"));
        state.announced.push({ vips, exportTo });
        return Promise.resolve();
      },
      drain: () => {
        state.drained++;
        return Promise.resolve();
      },
    },
    lease: {
      renew: (speaker) => {
        state.renewals++;
        state.renewedFor.push(speaker);
        return Promise.resolve();
      },
    },
    sessions: () => Promise.resolve(new Map([[RR, { established: true, bfdUp: state.bfdUp }]])),
    speakerInstance: () => Promise.resolve(state.speaker),
    probe: async (): Promise<NodeRouteProbeResult> => {
      await new Promise((r) => setTimeout(r, state.probeDelayMs));
      return state.route
        ? { route: true, ready: state.ready, detail: "ok" }
        : { route: false, detail: "no answer" };
    },
    registry: new Registry(),
    log: pino({ level: "silent" }),
    report: (p) => {
      state.events.push(...p);
      return Promise.resolve();
    },
    timing: { tickMs: 20, staleAfterMs: 150, reportHoldAfterMs: 200, ...timing },
  });
  const last = () => state.announced.at(-1);
  return { state, announcer, last };
}

describe("Announcer", () => {
  it("announces a candidate only once the node route is verified, on the BFD-protected session", async () => {
    const { state, announcer, last } = rig();
    announcer.setCandidates(["10.1.1.1"]);
    // Before the first check the route is unknown: nothing yet.
    expect(last()).toEqual({ vips: [], exportTo: [] });
    announcer.start();
    await until(() => last()?.vips.length === 1);
    expect(last()).toEqual({ vips: ["10.1.1.1"], exportTo: [RR] });
    state.bfdUp = false;
    await until(() => last()?.exportTo.length === 0);
    await announcer.stop();
  });

  it("withdraws after two failed route checks, not after one, and announces again on the next success", async () => {
    const { state, announcer, last } = rig({ tickMs: 50 });
    announcer.setCandidates(["10.1.1.1"]);
    announcer.start();
    await until(() => last()?.vips.length === 1);
    state.route = false;
    const lostAt = Date.now();
    await until(() => last()?.vips.length === 0);
    // Two ticks of 50 ms at least.
    expect(Date.now() - lostAt).toBeGreaterThanOrEqual(50);
    state.route = true;
    await until(() => last()?.vips.length === 1);
    await announcer.stop();
  });

  it("withdraws everything when the node agent relays 'not Ready', and reports a lasting hold", async () => {
    const { state, announcer, last } = rig();
    announcer.setCandidates(["10.1.1.1"]);
    announcer.start();
    await until(() => last()?.vips.length === 1);
    state.ready = false;
    await until(() => last()?.vips.length === 0);
    await until(() => state.events.some((e) => e.reason === "NotReady"));
    expect(state.events.find((e) => e.reason === "NotReady")).toMatchObject({
      object: "ns/lb-1",
      kind: "Pod",
      uid: "uid-1",
    });
    state.ready = true;
    await until(() => last()?.vips.length === 1);
    await announcer.stop();
  });

  it("renews the lease only while its checks complete, so a stuck controller loses it", async () => {
    const { state, announcer } = rig();
    announcer.start();
    await until(() => state.renewals >= 3);
    state.probeDelayMs = 1_000; // a check that hangs (with a candidate to check)
    announcer.setCandidates(["10.1.1.1"]);
    await new Promise((r) => setTimeout(r, 300));
    const frozen = state.renewals;
    await new Promise((r) => setTimeout(r, 300));
    expect(state.renewals).toBe(frozen);
    state.probeDelayMs = 0;
    await until(() => state.renewals > frozen, 3_000);
    await announcer.stop();
  });

  it("stops renewing the lease while the speaker refuses the decision, so the watchdog withdraws", async () => {
    const { state, announcer, last } = rig();
    announcer.setCandidates(["10.1.1.1"]);
    announcer.start();
    await until(() => last()?.vips.length === 1 && state.renewals > 0);
    state.failWrites = true;
    announcer.setCandidates(["10.1.1.1", "10.1.1.2"]);
    await new Promise((r) => setTimeout(r, 100));
    const frozen = state.renewals;
    await new Promise((r) => setTimeout(r, 300));
    expect(state.renewals).toBe(frozen);
    state.failWrites = false;
    await until(() => last()?.vips.length === 2 && state.renewals > frozen);
    await announcer.stop();
  });

  it("vouches for a restarted speaker only once a decision was written after it started", async () => {
    const { state, announcer, last } = rig();
    announcer.setCandidates(["10.1.1.1"]);
    announcer.start();
    await until(() => last()?.vips.length === 1 && state.renewedFor.at(-1) === "speaker-1");
    const writes = state.announced.length;
    state.speaker = "speaker-2";
    await until(() => state.renewedFor.at(-1) === "speaker-2");
    // A write (the same decision: SpeakerControl skips rewriting an identical config) came first.
    expect(state.announced.length).toBeGreaterThan(writes);
    await announcer.stop();
  });

  it("drain withdraws through the speaker, and announces and renews nothing afterwards", async () => {
    const { state, announcer, last } = rig();
    announcer.setCandidates(["10.1.1.1"]);
    announcer.start();
    await until(() => last()?.vips.length === 1);
    await announcer.drain(1_000);
    expect(state.drained).toBe(1);
    const calls = state.announced.length;
    const renewals = state.renewals;
    announcer.setCandidates(["10.1.1.1", "10.1.1.2"]);
    await new Promise((r) => setTimeout(r, 100));
    expect(state.announced.length).toBe(calls);
    expect(state.renewals).toBe(renewals);
    await announcer.stop();
  });
});
