// How a cloud machine lives with its bootstrap script. It runs the script once, when it is made
// (cloud-init runs user data on first boot only; on GCE the script runs at every boot but stops at
// once on a machine that has joined). So a later change of the script, from a new portable-lb or
// another setting, reaches machines made after it and leaves running ones as they are, as on
// premises. Replacing machines for it would take the control plane's etcd (the cluster's whole
// state) along, and every LB node at once. To renew one worker or LB node: `pulumi up --replace`
// its instance. Its planned address goes with it, so a replacement deletes the old machine first.
import type * as pulumi from "@pulumi/pulumi";

/** The options of a machine whose bootstrap script is the input `scriptInput`. */
export function bootOnceOptions(scriptInput: string): pulumi.CustomResourceOptions {
  return { ignoreChanges: [scriptInput], deleteBeforeReplace: true };
}
