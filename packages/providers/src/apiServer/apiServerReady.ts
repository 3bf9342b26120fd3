// A provisioned cluster's API server, ready: a resource that is created once GET /readyz answers
// (waitForApiServer.ts), after the machines it names exist. The environment's Kubernetes objects
// depend on it, so nothing is applied to a cluster still booting. Made again when a machine is
// replaced (a new control plane boots afresh). Its provider captures only the path of the wait's
// module, which its process loads: Pulumi never serializes the code itself (as the lab's resources).
import { extname, join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { ApiServerWait, waitForApiServer } from "./waitForApiServer.ts";

export interface ApiServerReadyArgs {
  /** The admin kubeconfig (a secret): its server, CA and client certificate. */
  kubeconfig: pulumi.Input<string>;
  /** The ids of the cluster's machines: known once they exist, and a new one waits again. */
  machines: pulumi.Input<string>[];
  timeoutS?: number;
}

interface Inputs {
  kubeconfig: string;
  machines: string[];
  timeoutS?: number;
}

/** The wait's module beside this file (.ts in the sources, .js once built). */
export const WAIT_MODULE = join(__dirname, `waitForApiServer${extname(__filename)}`);

/** The dynamic provider: create waits; a change of machines replaces (and so waits again). */
export function apiServerReadyProvider(module: string): pulumi.dynamic.ResourceProvider {
  return {
    async create(inputs: Inputs) {
      // Required at run time, in the provider's process (see the file's comment).
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const wait = (require(module) as { waitForApiServer: typeof waitForApiServer }).waitForApiServer;
      const opts: ApiServerWait = inputs.timeoutS === undefined ? {} : { timeoutS: inputs.timeoutS };
      const ready = await wait(inputs.kubeconfig, opts);
      // The kubeconfig stays in the inputs (a secret there); the outputs hold no credential.
      return {
        id: `${ready.server}@${Date.now().toString(36)}`,
        outs: { server: ready.server, machines: inputs.machines, waitedS: ready.waitedS },
      };
    },
    // A new API address comes with a new control plane (its script names the address), so the
    // machines alone decide. Unchanged, nothing waits: a later `up` finds the cluster as it was.
    diff(_id: string, olds: { machines: string[] }, news: Inputs) {
      const same = JSON.stringify(olds.machines) === JSON.stringify(news.machines);
      return Promise.resolve(same ? { changes: false } : { changes: true, replaces: ["machines"] });
    },
  };
}

export class ApiServerReady extends pulumi.dynamic.Resource {
  /** The API server that answered. */
  declare readonly server: pulumi.Output<string>;
  /** Seconds it took to answer ready after the machines existed. */
  declare readonly waitedS: pulumi.Output<number>;

  constructor(name: string, args: ApiServerReadyArgs, opts?: pulumi.CustomResourceOptions) {
    super(
      apiServerReadyProvider(WAIT_MODULE),
      name,
      { ...args, server: undefined, waitedS: undefined },
      opts,
      "providers",
      "ApiServerReady",
    );
  }
}
