import fc from "fast-check";
import { createServer as createHttpServer } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { parseHealthCheck, type HealthCheckSpec } from "@portable-lb/core/config";
import { pino } from "pino";
import { HealthChecker } from "./healthChecker.ts";
import { INITIAL_HEALTH, nextHealth, type HealthTarget } from "./healthState.ts";
import { probe } from "./probe.ts";

const spec = (o: Partial<HealthCheckSpec> = {}): HealthCheckSpec => ({
  kind: "tcp",
  intervalMs: 100,
  timeoutMs: 100,
  fall: 3,
  rise: 2,
  ...o,
});

describe("parseHealthCheck", () => {
  it("reads tcp, http:/path and options, with HAProxy's defaults", () => {
    expect(parseHealthCheck("tcp")).toEqual({
      kind: "tcp",
      intervalMs: 2000,
      timeoutMs: 1000,
      fall: 3,
      rise: 2,
    });
    expect(parseHealthCheck(" http:/ready  interval=500ms timeout=200ms fall=1 rise=5 ")).toEqual({
      kind: "http",
      path: "/ready",
      intervalMs: 500,
      timeoutMs: 200,
      fall: 1,
      rise: 5,
    });
  });

  it.each([
    ["http", '"http" is not a check; use "tcp" or "http:/path"'],
    ["tcp interval=2", "option interval: must be a duration like 500ms or 2s"],
    ["tcp fall=0", "option fall: Too small"],
    ["tcp every=2s", "known options: interval, timeout, fall, rise"],
    ["tcp interval", 'option "interval" must be key=value'],
    ["tcp interval=1s timeout=2s", "timeout (2000ms) must not exceed interval (1000ms)"],
  ])("refuses %j with a message naming the problem", (value, message) => {
    expect(() => parseHealthCheck(value)).toThrow(message);
  });
});

describe("nextHealth", () => {
  it("takes `fall` failures in a row to go down and `rise` successes in a row to come back", () => {
    const s = { fall: 3, rise: 2 };
    let h = INITIAL_HEALTH;
    for (const ok of [false, false, true, false, false]) h = nextHealth(h, ok, s);
    expect(h.healthy).toBe(true); // the success broke the streak
    h = nextHealth(h, false, s);
    expect(h.healthy).toBe(false);
    h = nextHealth(nextHealth(h, true, s), false, s);
    expect(h.healthy).toBe(false);
    h = nextHealth(nextHealth(h, true, s), true, s);
    expect(h.healthy).toBe(true);
  });

  it("flips only after a full streak of disagreeing results (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.boolean()),
        (fall, rise, results) => {
          let h = INITIAL_HEALTH;
          const seen: boolean[] = [];
          for (const ok of results) {
            const before = h.healthy;
            h = nextHealth(h, ok, { fall, rise });
            seen.push(ok);
            if (h.healthy !== before) {
              const need = before ? fall : rise;
              expect(seen.slice(-need).every((r) => r === h.healthy)).toBe(true);
              expect(seen.length).toBeGreaterThanOrEqual(need);
            }
          }
        },
      ),
    );
  });
});

describe("probe and HealthChecker against loopback servers", () => {
  const servers: Server[] = [];
  const listen = (s: Server) =>
    new Promise<number>((resolve) => {
      servers.push(s);
      s.listen(0, "127.0.0.1", () => resolve((s.address() as AddressInfo).port));
    });
  afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

  it("probes TCP and HTTP, and times out a silent server", async () => {
    const tcp = await listen(createServer((c) => c.end()));
    let status = 200;
    const http = await listen(createHttpServer((_req, res) => res.writeHead(status).end()));
    const silent = await listen(createHttpServer(() => undefined));
    const t = (port: number, s: Partial<HealthCheckSpec> = {}): HealthTarget => ({
      ip: "127.0.0.1",
      port,
      spec: spec(s),
    });
    expect(await probe(t(tcp))).toBe(true);
    expect(await probe(t(http, { kind: "http", path: "/healthz" }))).toBe(true);
    status = 503;
    expect(await probe(t(http, { kind: "http", path: "/healthz" }))).toBe(false);
    const started = Date.now();
    expect(await probe(t(silent, { kind: "http", path: "/", timeoutMs: 300 }))).toBe(false);
    expect(Date.now() - started).toBeLessThan(2_000);
    // A port nothing listens on: the closed server's port.
    const closed = await listen(createServer());
    await new Promise((r) => servers.pop()!.close(r));
    expect(await probe(t(closed))).toBe(false);
  });

  it("marks a backend down after `fall` failures and up after `rise` passes, calling back on each flip", async () => {
    let status = 200;
    const port = await listen(createHttpServer((_req, res) => res.writeHead(status).end()));
    const target: HealthTarget = {
      ip: "127.0.0.1",
      port,
      spec: spec({ kind: "http", path: "/", intervalMs: 100, fall: 2, rise: 2 }),
    };
    const flips: boolean[] = [];
    const checker = new HealthChecker({
      probe,
      log: pino({ level: "silent" }),
      onChange: () => flips.push(!checker.isUnhealthy(target)),
    });
    checker.setTargets([target]);
    const until = async (cond: () => boolean) => {
      const deadline = Date.now() + 5_000;
      while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    };
    expect(checker.isUnhealthy(target)).toBe(false);
    status = 500;
    await until(() => flips.length === 1);
    expect(checker.isUnhealthy(target)).toBe(true);
    expect(checker.unhealthyCount()).toBe(1);
    status = 200;
    await until(() => flips.length === 2);
    expect(flips).toEqual([false, true]);
    checker.setTargets([]);
    expect(checker.unhealthyCount()).toBe(0);
    checker.stop();
  });
});
