// Pulumi unit-test mocks shared by every package: record each resource the program registers and
// resolve outputs, so tests can assert the resource graph without an engine.
import * as pulumi from "@pulumi/pulumi";

export interface RecordedResource {
  type: string;
  name: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- resource inputs are untyped by nature
  inputs: Record<string, any>;
}

export function installMocks(): RecordedResource[] {
  const recorded: RecordedResource[] = [];
  // setMocks does all its work before its first await, so the mocks are in place when it returns.
  void pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        const inputs = args.inputs as Record<string, unknown>;
        recorded.push({ type: args.type, name: args.name, inputs });
        return { id: `${args.name}-id`, state: inputs };
      },
      call: (args) => args.inputs as Record<string, unknown>,
    },
    "portable-lb",
    "unit",
    false,
  );
  return recorded;
}

/** An output's value (under mocks every output resolves). */
export function valueOf<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply(resolve));
}

/** "Parent$Child" type chain of a resource, from its URN: how tests check `parent: this`. */
export async function typeChain(resource: pulumi.Resource): Promise<string> {
  const urn = await valueOf(resource.urn);
  return urn.split("::")[2]!;
}
