import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { nearestName } from "./nearestName.ts";
import { ConfigError, collect, parseOrThrow } from "./validation.ts";

const schema = z.object({
  kind: z.enum(["kubeconfig"], { error: "unknown environment kind; use one of: kubeconfig" }),
  nodes: z.array(z.object({ address: z.ipv4({ error: "not an IPv4 address; write e.g. 10.0.0.1" }) })),
});

describe("parseOrThrow", () => {
  it("returns the parsed value when the input is valid", () => {
    expect(parseOrThrow(schema, { kind: "kubeconfig", nodes: [] }, "env")).toEqual({
      kind: "kubeconfig",
      nodes: [],
    });
  });

  it("names every bad field with its value and the fix, one per line", () => {
    expect(() => parseOrThrow(schema, { kind: "aws", nodes: [{ address: "10.0.0" }] }, "env")).toThrow(
      new ConfigError(
        'env.kind: unknown environment kind; use one of: kubeconfig (got "aws")\n' +
          'env.nodes[0].address: not an IPv4 address; write e.g. 10.0.0.1 (got "10.0.0")',
      ),
    );
  });

  it("says 'not set' for a missing field", () => {
    expect(() => parseOrThrow(schema, { nodes: [] }, "env")).toThrow(/^env\.kind: .* \(not set\)$/);
  });

  it("is a pulumi.RunError, which Pulumi prints without a stack trace, and keeps each problem", () => {
    const err = new ConfigError(["a: one (got 1)", "b: two (got 2)"]);
    expect(pulumi.RunError.isInstance(err)).toBe(true);
    expect(err.problems).toEqual(["a: one (got 1)", "b: two (got 2)"]);
    expect(err.message).toBe("a: one (got 1)\nb: two (got 2)");
  });

  const strict = z.strictObject({
    dataPlane: z.strictObject({ mode: z.enum(["ipvs", "nftables"]).optional() }).optional(),
    replicas: z.number().int().min(1).max(9).optional(),
    ratio: z.number().min(0.5).optional(),
  });

  it("names each unknown key on its own line, with the nearest known key", () => {
    expect(() => parseOrThrow(strict, { dataplane: {}, replica: 2, zzzzzz: 1 }, "lb")).toThrow(
      new ConfigError([
        'lb.dataplane: is not a known key; did you mean "dataPlane"? (got {})',
        'lb.replica: is not a known key; did you mean "replicas"? (got 2)',
        "lb.zzzzzz: is not a known key; use one of: dataPlane, replicas, ratio (got 1)",
      ]),
    );
  });

  it("gives ranges and accepted values from the schema itself", () => {
    expect(() => parseOrThrow(strict, { replicas: 10, ratio: 0, dataPlane: { mode: "nft" } }, "lb")).toThrow(
      new ConfigError([
        'lb.dataPlane.mode: must be one of: ipvs, nftables; did you mean "nftables"? (got "nft")',
        "lb.replicas: must be a whole number from 1 to 9 (got 10)",
        "lb.ratio: must be a number of at least 0.5 (got 0)",
      ]),
    );
  });
});

describe("collect", () => {
  it("gathers a check's problems instead of throwing, and passes other errors on", () => {
    const problems: string[] = [];
    expect(collect(problems, () => 1)).toBe(1);
    expect(collect(problems, () => parseOrThrow(strict2, 0, "x"))).toBeUndefined();
    expect(problems).toEqual(["x: must be a whole number of at least 1 (got 0)"]);
    expect(() => collect(problems, () => JSON.parse("{"))).toThrow(SyntaxError);
  });
});

const strict2 = z.number().int().min(1);

describe("nearestName", () => {
  it.each([
    ["dataplane", "dataPlane"],
    ["minRx", "minRxMs"],
    ["backnd", "backend"],
    ["loadbalancer", "loadBalancer"],
    ["colour", undefined],
  ])("finds what %s meant: %s", (typed, meant) => {
    expect(nearestName(typed, ["dataPlane", "minRxMs", "backend", "loadBalancer", "routing"])).toBe(meant);
  });
});
