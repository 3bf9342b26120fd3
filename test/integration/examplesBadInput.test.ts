// The aws and gcp examples as users run them, through the real engine: wrong stack config fails
// `pulumi preview` before anything is planned, naming each key, its value and the fix, without a
// stack trace. (A preview that succeeds needs the aws or gcp, tls and random provider plugins,
// which the bootstrap does not build; examples/cloudExamples.test.ts checks their graphs under mocks.)
import { join } from "node:path";
import { failedPreview } from "../harness/failedPreview.ts";

const examples = join(__dirname, "..", "..", "examples");

describe("pulumi preview of the cloud examples with bad input", () => {
  it("aws: names no LB nodes, the API opened to the world and the zone outside the region; plans nothing", async () => {
    const { output, diagnostics, planned } = await failedPreview(
      join(examples, "aws", "index.ts"),
      {
        region: "eu-central-1",
        zones: ["eu-central-1a", "eu-west-1b"],
        apiAccessCidrs: ["0.0.0.0/0"],
        nodes: { lb: 0 },
        lbImage: "registry.example.com/portable-lb/lb:1",
      },
      "platform-aws",
    );
    expect(diagnostics).toEqual([
      [
        "nodes.lb: must be a whole number from 1 to 20 (got 0)",
        'apiAccessCidrs[0]: would open the Kubernetes API to the whole internet; list the ranges pulumi and kubectl run from, e.g. 203.0.113.0/24 (got "0.0.0.0/0")',
        'zones[1]: must be a zone of region eu-central-1, like eu-central-1a (got "eu-west-1b")',
      ].join("\n"),
    ]);
    expect(output).not.toMatch(/^\s+at /m);
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });

  it("gcp: names the malformed region; plans nothing", async () => {
    const { diagnostics, planned } = await failedPreview(
      join(examples, "gcp", "index.ts"),
      {
        project: "my-project-123",
        region: "europe_west4",
        zones: ["europe-west4-a", "europe-west4-b"],
        apiAccessCidrs: ["203.0.113.0/24"],
        lbImage: "registry.example.com/portable-lb/lb:1",
      },
      "platform-gcp",
    );
    expect(diagnostics).toEqual([
      'region: must be a GCP region like us-central1 or europe-west4 (got "europe_west4")',
    ]);
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });
});
