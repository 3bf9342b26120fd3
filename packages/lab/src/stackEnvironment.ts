// Which cluster a stack runs against, read from the stack's `portable-lb:environment` config:
// `kubeconfig` adopts an existing cluster (@portable-lb/providers), `lab` builds one on this machine
// (lab.ts).
import { ConfigError, parseOrThrow } from "@portable-lb/core";
import { kubeconfigEnvironmentSchema, resolveEnvironment, type Environment } from "@portable-lb/providers";
import type * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { Lab } from "./lab.ts";
import { labEnvironmentSchema } from "./labPlan.ts";

export const environmentSchema = z.discriminatedUnion(
  "kind",
  [kubeconfigEnvironmentSchema, labEnvironmentSchema],
  {
    error: 'unknown environment kind; set environment.kind to "kubeconfig" or "lab"',
  },
);

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
  const lab = new Lab(env.name, { environment: env, network: config.requireObject("network") });
  return { ...lab.environment, kubeconfig: lab.kubeconfig, lab };
}
