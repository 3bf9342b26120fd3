// What a user sees when `pulumi preview` of the root program meets bad input (issue 17), through the
// real engine: every problem at once in the user's words, printed as Pulumi prints its own errors
// (no stack trace, no colour codes), and no resource planned but the stack itself.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EngineEvent } from "@pulumi/pulumi/automation/index.js";
import { firstTryProblems, firstTrySettings } from "../harness/badStackInput.ts";
import { TestStack } from "../harness/testStack.ts";

const repoRoot = join(__dirname, "..", "..");

describe("pulumi preview of the root program with bad input", () => {
  let dir: string;
  let stack: TestStack;
  let notKubeconfig: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "plb-bad-input-"));
    notKubeconfig = join(dir, "hostname");
    await writeFile(notKubeconfig, "myhost\n");
    stack = await TestStack.create({
      program: repoRoot,
      config: Object.fromEntries(
        Object.entries(firstTrySettings(notKubeconfig)).map(([key, value]) => [`portable-lb:${key}`, value]),
      ),
    });
  });
  afterAll(async () => {
    await stack?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("lists every problem once, without a stack trace, and plans nothing", async () => {
    let output = "";
    const events: EngineEvent[] = [];
    await expect(
      stack.stack.preview({ color: "never", onOutput: (o) => (output += o), onEvent: (e) => events.push(e) }),
    ).rejects.toThrow();

    const diagnostics = events
      .map((e) => e.diagnosticEvent)
      .filter((d) => d?.severity === "error")
      .map((d) => d!.message.trim());
    expect(diagnostics).toEqual([firstTryProblems(notKubeconfig).join("\n")]);
    // Pulumi's own shape for a RunError: no "unhandled exception", no stack frames, no colour codes.
    expect(output).not.toContain("unhandled exception");
    expect(output).not.toMatch(/^\s+at /m);
    expect(output).not.toContain("\u001b[");
    // Only the stack itself (which every new stack plans) is in the plan.
    const planned = events.flatMap((e) => (e.resourcePreEvent ? [e.resourcePreEvent.metadata.type] : []));
    expect(planned).toEqual(["pulumi:pulumi:Stack"]);
  });
});
