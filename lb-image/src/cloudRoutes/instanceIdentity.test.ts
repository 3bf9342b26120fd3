import fc from "fast-check";
import { parseProviderId, providerId, resolveIdentity, type MetadataSource } from "./instanceIdentity.ts";

describe("parseProviderId", () => {
  it("reads AWS and GCE providerIDs", () => {
    expect(parseProviderId("aws:///us-east-1a/i-0123456789abcdef0")).toEqual({
      cloud: "aws",
      zone: "us-east-1a",
      instanceId: "i-0123456789abcdef0",
    });
    expect(parseProviderId("gce://my-project/europe-west1-b/lb-node-1")).toEqual({
      cloud: "gcp",
      project: "my-project",
      zone: "europe-west1-b",
      name: "lb-node-1",
    });
  });
  it.each([
    "",
    "kind://docker/kind/node",
    "aws:///us-east-1a/x-123",
    "gce://p/z",
    "aws://us-east-1a/i-0123abcd",
  ])("names no instance in %j", (id) => expect(parseProviderId(id)).toBeUndefined());
  it("is the inverse of providerId for AWS identities", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z]{2}-[a-z]+-[1-9][a-f]$/),
        fc.stringMatching(/^[0-9a-f]{17}$/),
        (zone, hex) => {
          const id = { cloud: "aws" as const, zone, instanceId: `i-${hex}` };
          expect(parseProviderId(providerId(id))).toEqual(id);
        },
      ),
    );
  });
});

describe("resolveIdentity", () => {
  const metadata = (answer: Awaited<ReturnType<MetadataSource["identity"]>> | Error): MetadataSource => ({
    identity: () => (answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer)),
  });
  const aws = { cloud: "aws" as const, zone: "us-east-1a", instanceId: "i-0123456789abcdef0" };

  it("prefers the Node's providerID", async () => {
    const r = await resolveIdentity(
      { name: "n1", providerId: "aws:///us-east-1a/i-0123456789abcdef0" },
      "aws",
      metadata(new Error("x")),
    );
    expect(r).toEqual({ identity: aws, source: "providerID" });
  });
  it("falls back to the metadata service", async () => {
    expect(await resolveIdentity({ name: "n1", providerId: undefined }, "aws", metadata(aws))).toEqual({
      identity: aws,
      source: "metadata",
    });
  });
  it("names the Node and the fix when neither answers", async () => {
    const r = await resolveIdentity(
      { name: "n1", providerId: "kind://x" },
      "aws",
      metadata(new Error("timeout")),
    );
    expect(r.identity).toBeUndefined();
    expect("problem" in r && r.problem).toMatch(
      /Node n1 has spec.providerID "kind:\/\/x" naming no aws instance.*providerID/,
    );
  });
  it("does not take an instance of the other cloud", async () => {
    const r = await resolveIdentity({ name: "n1", providerId: "gce://p/z/n" }, "aws", undefined);
    expect(r.identity).toBeUndefined();
  });
});
