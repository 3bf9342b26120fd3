import { ProbeTracker, httpGetArgs, nextProbeAt, probeTiming, resolvePort } from "./probes.ts";

describe("probe timing", () => {
  it("uses the Kubernetes defaults", () => {
    expect(probeTiming({})).toEqual({
      initialDelayMs: 0,
      periodMs: 10_000,
      timeoutMs: 1_000,
      successThreshold: 1,
      failureThreshold: 3,
    });
    expect(
      probeTiming({
        initialDelaySeconds: 2,
        periodSeconds: 1,
        timeoutSeconds: 3,
        successThreshold: 2,
        failureThreshold: 1,
      }),
    ).toEqual({
      initialDelayMs: 2_000,
      periodMs: 1_000,
      timeoutMs: 3_000,
      successThreshold: 2,
      failureThreshold: 1,
    });
  });

  it("runs first after the initial delay, then every period", () => {
    const t = probeTiming({ initialDelaySeconds: 5, periodSeconds: 2 });
    expect(nextProbeAt(t, 1_000, undefined)).toBe(6_000);
    expect(nextProbeAt(t, 1_000, 6_000)).toBe(8_000);
  });
});

describe("ProbeTracker", () => {
  const timing = (successThreshold: number, failureThreshold: number) => ({
    ...probeTiming({}),
    successThreshold,
    failureThreshold,
  });

  it("starts readiness failed, liveness passed, startup not passed", () => {
    expect(new ProbeTracker("readiness", timing(1, 3)).passed).toBe(false);
    expect(new ProbeTracker("liveness", timing(1, 3)).passed).toBe(true);
    expect(new ProbeTracker("startup", timing(1, 3)).passed).toBe(false);
  });

  it("flips only after the threshold of results in a row", () => {
    const t = new ProbeTracker("readiness", timing(2, 3));
    expect(t.record(true)).toBe(false);
    expect(t.record(false)).toBe(false);
    expect(t.record(true)).toBe(false);
    expect(t.record(true)).toBe(true);
    expect(t.passed).toBe(true);
    expect([t.record(false), t.record(false), t.record(true), t.record(false), t.record(false)]).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(t.record(false)).toBe(true);
    expect(t.passed).toBe(false);
  });

  it("fails a liveness probe after failureThreshold failures", () => {
    const t = new ProbeTracker("liveness", timing(1, 2));
    expect(t.record(false)).toBe(false);
    expect(t.record(false)).toBe(true);
    expect(t.passed).toBe(false);
  });
});

describe("handlers", () => {
  it("resolves named and numeric ports", () => {
    const ports = [{ name: "http", containerPort: 8080 }];
    expect(resolvePort("http", ports)).toBe(8080);
    expect(resolvePort("9090", ports)).toBe(9090);
    expect(resolvePort(81, ports)).toBe(81);
    expect(resolvePort("metrics", ports)).toBeUndefined();
  });

  it("makes the curl call of an httpGet check", () => {
    const args = httpGetArgs(
      { port: 8080, path: "healthz", scheme: "HTTPS", httpHeaders: [{ name: "X-Probe", value: "1" }] },
      8080,
      "10.244.1.5",
      2_000,
    );
    expect(args.at(-1)).toBe("https://10.244.1.5:8080/healthz");
    expect(args).toEqual(expect.arrayContaining(["--max-time", "2", "-H", "X-Probe: 1", "-k", "--noproxy"]));
    expect(httpGetArgs({ port: 80, host: "127.0.0.1" }, 80, "10.244.1.5", 1_000).at(-1)).toBe(
      "http://127.0.0.1:80/",
    );
  });
});
