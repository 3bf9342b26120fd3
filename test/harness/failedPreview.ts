// A `pulumi preview` through the real engine that must fail (bad input): what it printed, the
// error diagnostics, and the resources it planned. The stack is removed afterwards.
import type { EngineEvent } from "@pulumi/pulumi/automation/index.js";
import { TestStack } from "./testStack.ts";

export interface FailedPreview {
  output: string;
  /** The error diagnostics' messages, trimmed. */
  diagnostics: string[];
  /** The types of the resources it would have created. */
  planned: string[];
}

/** Previews `program` with `settings` (keys under the project's namespace); rejects if it succeeds. */
export async function failedPreview(
  program: string,
  settings: Record<string, unknown>,
  projectName = "portable-lb",
): Promise<FailedPreview> {
  const stack = await TestStack.create({
    program,
    projectName,
    config: Object.fromEntries(
      Object.entries(settings).map(([key, value]) => [`${projectName}:${key}`, value]),
    ),
  });
  try {
    let output = "";
    const events: EngineEvent[] = [];
    const succeeded = await stack.stack
      .preview({ color: "never", onOutput: (o) => (output += o), onEvent: (e) => events.push(e) })
      .then(
        () => true,
        () => false,
      );
    if (succeeded) throw new Error(`pulumi preview of ${program} succeeded; bad input should fail it`);
    const diagnostics = events
      .map((e) => e.diagnosticEvent)
      .filter((d) => d?.severity === "error")
      .map((d) => d!.message.trim());
    const planned = events.flatMap((e) => (e.resourcePreEvent ? [e.resourcePreEvent.metadata.type] : []));
    return { output, diagnostics, planned };
  } finally {
    await stack.dispose();
  }
}
