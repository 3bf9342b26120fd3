import { RestartBackOff } from "./backoff.ts";

describe("RestartBackOff", () => {
  it("restarts at once the first time, then waits 10 s, 20 s, 40 s … from each finish, capped at 5 minutes", () => {
    let now = 0;
    const b = new RestartBackOff(10_000, 300_000, () => now);
    expect(b.waitMs("c", 0)).toBe(0); // first crash: immediate restart
    now = 1_000;
    expect(b.waitMs("c", 1_000)).toBe(10_000); // crashed again at 1 s: wait until 11 s
    now = 11_000;
    expect(b.waitMs("c", 1_000)).toBe(0);
    expect(b.currentDelayMs("c")).toBe(20_000);
    now = 12_000;
    expect(b.waitMs("c", 12_000)).toBe(20_000);
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      now += b.currentDelayMs("c");
      expect(b.waitMs("c", now - b.currentDelayMs("c"))).toBe(0);
      delays.push(b.currentDelayMs("c"));
    }
    expect(delays).toEqual([40_000, 80_000, 160_000, 300_000, 300_000, 300_000, 300_000, 300_000]);
  });

  it("starts over after a run longer than twice the cap, and per container", () => {
    let now = 0;
    const b = new RestartBackOff(10_000, 300_000, () => now);
    b.waitMs("c", 0);
    now = 20_000;
    expect(b.waitMs("c", 5_000)).toBe(0);
    expect(b.currentDelayMs("c")).toBe(20_000);
    now = 20_000 + 600_001;
    expect(b.waitMs("c", now)).toBe(0);
    expect(b.currentDelayMs("c")).toBe(10_000);
    expect(b.waitMs("other", now)).toBe(0);
    b.forget("c");
    expect(b.currentDelayMs("c")).toBe(0);
  });
});
