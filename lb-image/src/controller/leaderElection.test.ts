import { MicroTime, decide } from "./leaderElection.ts";

const lease = (holder: string | undefined, renewedSecondsAgo: number, duration = 15) => ({
  spec: {
    holderIdentity: holder,
    renewTime: new Date(Date.now() - renewedSecondsAgo * 1000),
    leaseDurationSeconds: duration,
  },
});

describe("decide", () => {
  it("acquires a missing or released lease", () => {
    expect(decide(undefined, "a", new Date())).toBe("acquire");
    expect(decide(lease(undefined, 1), "a", new Date())).toBe("acquire");
  });
  it("renews its own lease, even late (only others must wait for expiry)", () => {
    expect(decide(lease("a", 1), "a", new Date())).toBe("renew");
    expect(decide(lease("a", 60), "a", new Date())).toBe("renew");
  });
  it("follows another holder until the lease expires, then takes over", () => {
    expect(decide(lease("b", 5), "a", new Date())).toBe("follow");
    expect(decide(lease("b", 16), "a", new Date())).toBe("acquire");
  });
});

describe("MicroTime", () => {
  it("serializes with the six fractional digits the API server requires", () => {
    expect(new MicroTime("2026-11-22T05:22:43.853Z").toISOString()).toBe("2026-11-22T05:22:43.853000Z");
    expect(JSON.stringify({ t: new MicroTime("2026-11-22T05:22:43.853Z") })).toBe(
      '{"t":"2026-11-22T05:22:43.853000Z"}',
    );
  });
});
