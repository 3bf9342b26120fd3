import { MicroTime, allocatorLease, decide } from "./leaderElection.ts";

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

describe("allocatorLease", () => {
  it("names one valid Lease per load-balancer class", () => {
    expect(allocatorLease("portable-lb.io/ecmp")).toBe("portable-lb-allocator-portable-lb.io-ecmp");
    expect(allocatorLease("Example.com/LB_b")).toBe("portable-lb-allocator-example.com-lb-b");
    expect(allocatorLease("portable-lb.io/a")).not.toBe(allocatorLease("portable-lb.io/b"));
    const long = allocatorLease(`${"x".repeat(250)}.io/y`);
    expect(long.length).toBeLessThanOrEqual(253);
    expect(long).toMatch(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/);
  });
});
