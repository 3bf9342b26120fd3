// Pulumi unit-test mocks shared by every package: record each resource the program registers and
// resolve outputs, so tests can assert the resource graph without an engine.
import * as pulumi from "@pulumi/pulumi";
import * as settings from "@pulumi/pulumi/runtime/settings.js";

export interface RecordedResource {
  type: string;
  name: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- resource inputs are untyped by nature
  inputs: Record<string, any>;
  /** "urn::id" of the explicit provider, when the resource was given one. */
  provider?: string;
}

/**
 * What a provider would add to a resource's state beyond its inputs (a certificate's PEM, an id the
 * cloud assigns), and what an invoke (a data source) returns; by default, nothing and the invoke's
 * own arguments.
 */
export interface MockProvider {
  outputs?: (
    type: string,
    name: string,
    inputs: Record<string, unknown>,
  ) => Record<string, unknown> | undefined;
  call?: (token: string, inputs: Record<string, unknown>) => Record<string, unknown> | undefined;
  /** The id the cloud would assign, where its shape matters (default `NAME-id`). */
  id?: (type: string, name: string) => string | undefined;
}

/** `project` namespaces the program's config: an example app's own project name (its Pulumi.yaml). */
export function installMocks(provider: MockProvider = {}, project = "portable-lb"): RecordedResource[] {
  const recorded: RecordedResource[] = [];
  // setMocks does all its work before its first await, so the mocks are in place when it returns.
  void pulumi.runtime.setMocks(
    {
      newResource: (args) => {
        const inputs = args.inputs as Record<string, unknown>;
        recorded.push({
          type: args.type,
          name: args.name,
          inputs,
          ...(args.provider && { provider: args.provider }),
        });
        return {
          id: provider.id?.(args.type, args.name) ?? `${args.name}-id`,
          state: { ...inputs, ...provider.outputs?.(args.type, args.name, inputs) },
        };
      },
      call: (args) =>
        provider.call?.(args.token, args.inputs as Record<string, unknown>) ??
        (args.inputs as Record<string, unknown>),
    },
    project,
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

/**
 * Resolves once every pending resource registration has reached the mocks. Uses the runtime's
 * waitForRPCs (marked internal, but the one signal that covers registrations still queued; the
 * @pulumi/pulumi version is pinned, so a change there shows up as a failing unit test).
 */
export async function settled(): Promise<void> {
  await (settings as unknown as { waitForRPCs(): Promise<void> }).waitForRPCs();
}

/** What `make` registers, alone in `recorded` (cleared first), once it has all reached the mocks. */
export async function registered<T>(recorded: RecordedResource[], make: () => T): Promise<T> {
  recorded.length = 0;
  const made = make();
  await settled();
  return made;
}

// How the runtime serializes a secret value to the monitor (the special-signature envelope).
const SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270";
const SIG_KEY = "4dabf18193072939515e22adb298388d";

/** The plaintext of a recorded secret input, or undefined when the input is not a secret. */
export function secretValue(input: unknown): unknown {
  if (
    input !== null &&
    typeof input === "object" &&
    (input as Record<string, unknown>)[SIG_KEY] === SECRET_SIG
  ) {
    return (input as { value: unknown }).value;
  }
  return undefined;
}
