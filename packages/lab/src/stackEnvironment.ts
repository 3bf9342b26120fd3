// Which cluster a stack runs against, read from the stack's `portable-lb:environment` config:
// `kubeconfig` adopts an existing cluster (@portable-lb/providers), `lab` builds one on this machine
// (lab.ts). The provisioning kinds (onprem, aws, gcp) are checked, but not yet provisioned here.
import { ConfigError, parseOrThrow, problem } from "@portable-lb/core";
import { environmentSchemaWith, resolveEnvironment, type Environment } from "@portable-lb/providers";
import type * as pulumi from "@pulumi/pulumi";
import type { z } from "zod";
import { Lab } from "./lab.ts";
import { labEnvironmentSchema } from "./labPlan.ts";

export const environmentSchema = environmentSchemaWith(labEnvironmentSchema);

export type EnvironmentConfig = z.output<typeof environmentSchema>;

/** A resolved environment; `lab` is set for a lab, whose kubeconfig is the path of its own file. */
export type StackEnvironment = Environment & { lab?: Lab };

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
  if (env.kind !== "lab")
    throw new ConfigError(
      problem(
        "environment.kind",
        `the root program cannot provision ${env.kind} clusters yet (issue 18); provision one with @portable-lb/providers in your own program, or use "kubeconfig" with a cluster you have`,
        env.kind,
      ),
    );
  const lab = new Lab(env.name, { environment: env, network: config.requireObject("network") });
  return { ...lab.environment, kubeconfig: lab.kubeconfig, lab };
}
