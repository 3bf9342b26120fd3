// Which cluster a stack runs against, read from the stack's `portable-lb:environment` config.
// This first environment kind adopts an existing cluster by its kubeconfig; the provisioning kinds
// (onprem, aws, gcp, lab) join the union as they are built.
import { readFileSync } from "node:fs";
import { ConfigError, parseOrThrow } from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";

export const environmentSchema = z.discriminatedUnion(
  "kind",
  [
    z.object({
      kind: z.literal("kubeconfig"),
      kubeconfig: z
        .string({ error: "the path to a kubeconfig file is required, e.g. ~/.kube/config" })
        .min(1),
    }),
  ],
  { error: 'unknown environment kind; set environment.kind to "kubeconfig"' },
);

export type EnvironmentConfig = z.output<typeof environmentSchema>;

export interface Environment {
  kind: EnvironmentConfig["kind"];
  /** Kubeconfig contents, kept secret in state. */
  kubeconfig: pulumi.Output<string>;
}

export function resolveEnvironment(config: EnvironmentConfig): Environment {
  const path = config.kubeconfig.replace(/^~(?=\/)/, process.env.HOME ?? "~");
  let contents: string;
  try {
    contents = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(
      `environment.kubeconfig: cannot read ${JSON.stringify(config.kubeconfig)} (${(err as Error).message}); point it at an existing kubeconfig file`,
    );
  }
  return { kind: config.kind, kubeconfig: pulumi.secret(contents) };
}

/** Reads and checks `portable-lb:environment` (an object) from the stack config. */
export function environmentFromConfig(config: pulumi.Config): Environment {
  const raw = config.getObject<unknown>("environment");
  if (raw === undefined) {
    throw new ConfigError(
      `${config.name}:environment: not set; run 'pulumi config set --path environment.kind kubeconfig' and 'pulumi config set --path environment.kubeconfig <path>'`,
    );
  }
  return resolveEnvironment(parseOrThrow(environmentSchema, raw, "environment"));
}
