// The resource options a component gives its machines, which Pulumi's mocks do not see: captured by a
// transformation on the component, which Pulumi applies to every child it makes.
import type * as pulumi from "@pulumi/pulumi";
import { settled } from "../../../../test/unit/pulumiMocks.ts";

/**
 * Every machine (`type`) that `make` creates runs its script (input `scriptInput`) once: a changed
 * script leaves it be, and a replacement deletes it first (machineLifecycle.ts). `make` returns how
 * many machines its plan has, the control plane included.
 */
export async function expectMachinesBootOnce(
  type: string,
  scriptInput: string,
  make: (opts: pulumi.ComponentResourceOptions) => number,
): Promise<void> {
  const options: pulumi.ResourceTransformationArgs["opts"][] = [];
  const machines = make({
    transformations: [
      (a) => {
        if (a.type === type) options.push(a.opts);
        return undefined;
      },
    ],
  });
  await settled();
  // Only these fields: the options hold the parent component, too large for a failure's diff.
  const lifecycle = (options as pulumi.CustomResourceOptions[]).map((o) => ({ ignoreChanges: o.ignoreChanges, deleteBeforeReplace: o.deleteBeforeReplace }));
  expect(lifecycle).toEqual(
    Array.from({ length: machines }, () => ({ ignoreChanges: [scriptInput], deleteBeforeReplace: true })),
  );
}
