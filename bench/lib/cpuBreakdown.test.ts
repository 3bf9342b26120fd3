import { LOAD_CLIENT, REST, cpuBreakdown } from "./cpuBreakdown.ts";
import { sample } from "./testing/processSample.ts";

describe("cpuBreakdown", () => {
  it("splits a run's busy CPU per request into the lab's groups, the load client and the rest", () => {
    const controller = ["node", "/usr/local/bin/portable-lb-controller"];
    const before = [sample(10, controller, [100, 0, 0, 0]), sample(20, ["httpd", "-f"], [0, 0, 0, 0])];
    const after = [sample(10, controller, [150, 50, 0, 0]), sample(20, ["httpd", "-f"], [300, 100, 100, 0])];
    // 10 s, 2,000 requests; at 100 ticks/s the controller took 1 s, httpd 5 s; the machine was busy
    // 15 s, the load client 4 s of it.
    const where = cpuBreakdown({ before, after, elapsedS: 10, requests: 2000, busyS: 15, clientS: 4 });
    expect(where).toEqual({
      "portable-lb-controller": 0.5,
      httpd: 2.5,
      [LOAD_CLIENT]: 2,
      [REST]: 2.5,
    });
  });

  it("counts a run without requests as one, so a failed run still reads", () => {
    const where = cpuBreakdown({ before: [], after: [], elapsedS: 1, requests: 0, busyS: 0.5, clientS: 0.1 });
    expect(where[LOAD_CLIENT]).toBeCloseTo(100);
    expect(where[REST]).toBeCloseTo(400);
  });
});
