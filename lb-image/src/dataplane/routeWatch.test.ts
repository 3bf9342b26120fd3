// `ip monitor` in a network namespace of its own: what it hears, and when it says a read-back of the
// routes is due.
import { execFileSync } from "node:child_process";
import { RouteWatch } from "./routeWatch.ts";
import { waitFor } from "../common/testing/waitFor.ts";

const NS = `plb-rw-${process.pid}`;
const ip = (...args: string[]) => execFileSync("ip", ["-n", NS, ...args], { timeout: 10_000 });
beforeAll(() => {
  execFileSync("ip", ["netns", "add", NS]);
  ip("link", "set", "lo", "up");
});
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

const settle = () => new Promise((r) => setTimeout(r, 300));

describe("RouteWatch", () => {
  it("hears route, rule and link changes and the tunnel's neighbour, and paces read-backs by whether it listens", async () => {
    let changes = 0;
    const watch = new RouteWatch(["ip", "netns", "exec", NS, "ip"], { watchedMs: 60_000 });
    // Not listening: the unwatched interval.
    const t0 = performance.now();
    expect([watch.due(t0, 1_000, t0 + 999), watch.due(t0, 1_000, t0 + 1_000)]).toEqual([false, true]);
    watch.start(() => changes++);
    try {
      // Its start counts as a change: what happened before it may have gone unheard.
      expect(await waitFor(() => changes > 0 && watch.live)).toBe(true);
      await settle();
      const heard: Record<string, boolean> = {};
      const hears = async (what: string, make: () => void) => {
        await settle();
        const readAt = performance.now();
        // Listening: only the safety net's interval, whatever the unwatched one.
        expect(watch.due(readAt, 0, readAt + 59_999)).toBe(false);
        make();
        heard[what] = await waitFor(() => watch.due(readAt, 0, readAt), 2_000);
      };
      await hears("local route", () =>
        ip("route", "add", "local", "10.1.1.5/32", "dev", "lo", "table", "local"),
      );
      await hears("rule", () =>
        ip("rule", "add", "pref", "101", "fwmark", "5", "lookup", "5", "protocol", "212"),
      );
      await hears("link", () => ip("link", "add", "plb-dsr", "type", "vxlan", "external", "dstport", "4789"));
      ip("link", "set", "plb-dsr", "up");
      ip("link", "add", "other", "type", "vxlan", "external", "dstport", "4790");
      ip("link", "set", "other", "up");
      await hears("tunnel's neighbour", () =>
        ip(
          "neigh",
          "replace",
          "169.254.255.1",
          "lladdr",
          "02:00:00:00:00:01",
          "dev",
          "plb-dsr",
          "nud",
          "permanent",
        ),
      );
      await hears("another link's neighbour", () =>
        ip(
          "neigh",
          "replace",
          "169.254.255.2",
          "lladdr",
          "02:00:00:00:00:02",
          "dev",
          "other",
          "nud",
          "permanent",
        ),
      );
      expect(heard).toEqual({
        "local route": true,
        rule: true,
        link: true,
        "tunnel's neighbour": true,
        "another link's neighbour": false,
      });
    } finally {
      watch.stop();
    }
    // Stopped: the unwatched interval again.
    const t1 = performance.now();
    expect(watch.live).toBe(false);
    expect(watch.due(t1, 1_000, t1 + 1_000)).toBe(true);
  }, 30_000);
});
