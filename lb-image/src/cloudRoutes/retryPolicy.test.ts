import fc from "fast-check";
import { CloudCallError, failureCause } from "./failureCause.ts";
import { backoffMs, withRetry } from "./retryPolicy.ts";

const awsError = (name: string, status: number) =>
  Object.assign(new Error(`${name} happened`), { name, $metadata: { httpStatusCode: status } });

describe("failureCause", () => {
  it.each([
    [awsError("RequestLimitExceeded", 503), "throttled"],
    [awsError("UnauthorizedOperation", 403), "permission"],
    [awsError("InternalError", 500), "server"],
    [awsError("InvalidRouteTableID.NotFound", 400), "not-found"],
    [awsError("InvalidParameterValue", 400), "invalid"],
    [Object.assign(new Error("x"), { code: 429 }), "throttled"],
    [Object.assign(new Error("x"), { code: 409 }), "conflict"],
    [Object.assign(new Error("x"), { code: 503 }), "server"],
    [Object.assign(new Error("x"), { code: "ECONNREFUSED" }), "network"],
    // google-gax: gRPC codes for REST errors
    [Object.assign(new Error("x"), { code: 8 }), "throttled"],
    [Object.assign(new Error("x"), { code: 6 }), "conflict"],
    [Object.assign(new Error("x"), { code: 5 }), "not-found"],
    [Object.assign(new Error("x"), { code: 7 }), "permission"],
    [Object.assign(new Error("x"), { code: 14 }), "server"],
  ])("%s is %s", (err, cause) => expect(failureCause(err)).toBe(cause));
});

describe("CloudCallError", () => {
  it("names the missing action and the resource for a permission error", () => {
    const e = new CloudCallError(
      "ec2:CreateRoute",
      "arn:aws:ec2:us-east-1:123456789012:route-table/rtb-1",
      awsError("UnauthorizedOperation", 403),
    );
    expect(e.reason).toBe("permission");
    expect(e.message).toMatch(
      /^missing permission ec2:CreateRoute on arn:aws:ec2:us-east-1:123456789012:route-table\/rtb-1/,
    );
  });
});

describe("backoffMs", () => {
  it("stays within [0, min(cap, base*2^n)] (full jitter)", () => {
    const policy = { attempts: 6, baseMs: 100, capMs: 3000 };
    fc.assert(
      fc.property(fc.nat(20), fc.double({ min: 0, max: 0.9999, noNaN: true }), (n, r) => {
        const d = backoffMs(policy, n, () => r);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(Math.min(3000, 100 * 2 ** n));
      }),
    );
  });
});

describe("withRetry", () => {
  const policy = { attempts: 4, baseMs: 1, capMs: 2 };
  const sleep = () => Promise.resolve();
  /** A call that always fails with `err`, and how often it was made. */
  const failing = (err: Error) => {
    let n = 0;
    return { call: () => Promise.reject(err).finally(() => n++), calls: () => n };
  };

  it("retries throttling until it succeeds", async () => {
    let calls = 0;
    const retried: string[] = [];
    const result = await withRetry(
      "ec2:ReplaceRoute",
      "rtb-1",
      () => (++calls < 3 ? Promise.reject(awsError("RequestLimitExceeded", 503)) : Promise.resolve("ok")),
      { policy, sleep, onRetry: (e) => retried.push(e.reason) },
    );
    expect(result).toBe("ok");
    expect(retried).toEqual(["throttled", "throttled"]);
  });

  it("gives up after the attempts allowed", async () => {
    const { call, calls } = failing(awsError("InternalError", 500));
    await expect(withRetry("ec2:CreateRoute", "rtb-1", call, { policy, sleep })).rejects.toThrow(
      /failed \(server\)/,
    );
    expect(calls()).toBe(4);
  });

  it("does not retry a permission error", async () => {
    const { call, calls } = failing(awsError("UnauthorizedOperation", 403));
    await expect(withRetry("ec2:CreateRoute", "rtb-1", call, { policy, sleep })).rejects.toThrow(
      /missing permission/,
    );
    expect(calls()).toBe(1);
  });
});
