import { z } from "zod";
import { ConfigError, parseOrThrow } from "./validation.ts";

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

  it("says 'nothing' for a missing field", () => {
    expect(() => parseOrThrow(schema, { nodes: [] }, "env")).toThrow(/^env\.kind: .* \(got nothing\)$/);
  });
});
