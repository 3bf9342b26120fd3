import { waitForQuiet } from "./connectionDrain.ts";

/** A counter that grows by one on every read until `untilMs` after it was made; when it last grew. */
function trafficFor(untilMs: number) {
  const start = Date.now();
  let count = 100;
  const traffic = {
    lastGrewAt: start,
    read: () => {
      if (Date.now() - start < untilMs) {
        count++;
        traffic.lastGrewAt = Date.now();
      }
      return Promise.resolve(count);
    },
  };
  return traffic;
}

describe("waitForQuiet (the drain after the withdrawal)", () => {
  const timing = { quietMs: 150, timeoutMs: 2_000, pollMs: 10 };

  it("lets an idle pod go after one quiet period", async () => {
    const r = await waitForQuiet({ ...timing, connections: () => Promise.resolve(7) });
    expect(r).toMatchObject({ quiet: true, connections: 0 });
    expect(r.waitedMs).toBeGreaterThanOrEqual(150);
    expect(r.waitedMs).toBeLessThan(1_000);
  });

  it("serves on while new connections arrive, and ends one quiet period after the last", async () => {
    const start = Date.now();
    const traffic = trafficFor(400);
    const r = await waitForQuiet({ ...timing, connections: traffic.read });
    expect(r.quiet).toBe(true);
    expect(r.connections).toBeGreaterThan(5);
    expect(traffic.lastGrewAt - start).toBeGreaterThan(300);
    expect(Date.now() - traffic.lastGrewAt).toBeGreaterThanOrEqual(150);
  });

  it("ends at the timeout when connections keep arriving", async () => {
    const r = await waitForQuiet({ ...timing, timeoutMs: 500, connections: trafficFor(60_000).read });
    expect(r.quiet).toBe(false);
    expect(r.waitedMs).toBeGreaterThanOrEqual(500);
    expect(r.waitedMs).toBeLessThan(1_500);
  });

  it("does not take an unreadable counter for a quiet one, and reports each failure", async () => {
    const errors: unknown[] = [];
    const r = await waitForQuiet({
      ...timing,
      timeoutMs: 400,
      connections: () => Promise.reject(new Error("nft: table gone")),
      onError: (err) => errors.push(err),
    });
    expect(r.quiet).toBe(false);
    expect(errors.length).toBeGreaterThan(3);
    expect(String(errors[0])).toContain("table gone");
  });

  it("counts a counter that went down (rules remade) as activity, not as negative connections", async () => {
    const counts = [50, 3, 3, 3];
    let i = 0;
    const r = await waitForQuiet({
      ...timing,
      connections: () => Promise.resolve(counts[Math.min(i++, 3)]!),
    });
    expect(r).toMatchObject({ quiet: true, connections: 0 });
  });
});
