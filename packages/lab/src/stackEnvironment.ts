// Which cluster a stack runs against, read from the stack's `portable-lb:environment` config:
// `kubeconfig` adopts an existing cluster, the provisioning kinds (onprem, aws, gcp) make one through
// their component (both @portable-lb/providers), and `lab` builds one on this machine (lab.ts).
import { ConfigError, parseOrThrow } from "@portable-lb/core";
import {
  environmentSchemaWith,
  provisionEnvironment,
  resolveEnvironment,
  type ClusterNetworks,
  type Environment,
  type NodeFact,
} from "@portable-lb/providers";
import type * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { Lab } from "./lab.ts";
import { labEnvironmentSchema } from "./labPlan.ts";

export const environmentSchema = environmentSchemaWith(labEnvironmentSchema);

export type EnvironmentConfig = z.output<typeof environmentSchema>;

/**
 * A resolved environment; `lab` is set for a lab, whose kubeconfig is the path of its own file, and
 * `nodes` for a provisioned cluster (its machines as planned).
 */
export type StackEnvironment = Environment & { lab?: Lab; nodes?: NodeFact[] };

/** Reads and checks `portable-lb:environment` (an object) from the stack config. */
export function environmentFromConfig(config: pulumi.Config): StackEnvironment {
  const raw = config.getObject<unknown>("environment");
  if (raw === undefined) {
    throw new ConfigError(
      `${config.name}:environment: not set; run 'pulumi config set --path environment.kind kubeconfig' and 'pulumi config set --path environment.kubeconfig <path>'`,
    );
  }
  const env = parseOrThrow(environmentSchema, raw, "environment");
  if (env.kind === "kubeconfig") return resolveEnvironment(env);
  if (env.kind !== "lab") {
    const sshPrivateKey = config.getSecret("sshPrivateKey");
    // The clouds' firewalls open the VXLAN port the cluster's flannel will use.
    const vxlanPort = config.getObject<{ vxlan?: { port?: number } }>("flannel")?.vxlan?.port;
    const network = config.requireObject<ClusterNetworks>("network");
    return provisionEnvironment(
      env,
      { ...network, ...(vxlanPort !== undefined && { flannelVxlanPort: vxlanPort }) },
      {
        ...(sshPrivateKey && { sshPrivateKey }),
      },
    );
  }
  const lab = new Lab(env.name, { environment: env, network: config.requireObject("network") });
  return { ...lab.environment, kubeconfig: lab.kubeconfig, lab };
}
