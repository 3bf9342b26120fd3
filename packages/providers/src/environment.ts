// Which cluster a stack runs against, read from the stack's `portable-lb:environment` config:
// `kubeconfig` adopts an existing cluster, `lab` builds one on this machine (lab/lab.ts); the other
// provisioning kinds (onprem, aws, gcp) join the union as they are built.
import { readFileSync } from "node:fs";
import {
  ConfigError,
  PLATFORMS,
  ipv4Address,
  parseOrThrow,
  type ClusterEnvironment,
} from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { Lab } from "./lab/lab.ts";
import { labEnvironmentSchema } from "./lab/labPlan.ts";

const kubeconfigEnvironmentSchema = z.object({
  kind: z.literal("kubeconfig"),
  kubeconfig: z.string({ error: "the path to a kubeconfig file is required, e.g. ~/.kube/config" }).min(1),
  /** Where that cluster runs; decides flannel's backend and whether cloud routes exist. */
  platform: z.enum(PLATFORMS, { error: `must be one of: ${PLATFORMS.join(", ")}` }).default("onprem"),
  /** The upstream routers that peer with our route reflectors, when the network offers BGP. */
  bgp: z
    .object({ routers: z.array(ipv4Address).min(1, { error: "needs at least one router address" }) })
    .optional(),
  /** How many nodes carry the LB node label. */
  lbNodeCount: z.number().int().min(0).optional(),
});

export const environmentSchema = z.discriminatedUnion(
  "kind",
  [kubeconfigEnvironmentSchema, labEnvironmentSchema],
  {
    error: 'unknown environment kind; set environment.kind to "kubeconfig" or "lab"',
  },
);

export type EnvironmentConfig = z.output<typeof environmentSchema>;

/**
 * A resolved environment. Its kubeconfig is the file's contents, kept secret in state, or for the
 * lab the path of the lab's own file; `lab` is set for a lab.
 */
export type Environment = ClusterEnvironment & { kubeconfig: pulumi.Output<string>; lab?: Lab };

export function resolveEnvironment(config: z.output<typeof kubeconfigEnvironmentSchema>): Environment {
  const path = config.kubeconfig.replace(/^~(?=\/)/, process.env.HOME ?? "~");
  let contents: string;
  try {
    contents = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(
      `environment.kubeconfig: cannot read ${JSON.stringify(config.kubeconfig)} (${(err as Error).message}); point it at an existing kubeconfig file`,
    );
  }
  return {
    kind: config.kind,
    platform: config.platform,
    kubeconfig: pulumi.secret(contents),
    ...(config.bgp && { bgp: config.bgp }),
    ...(config.lbNodeCount !== undefined && { lbNodeCount: config.lbNodeCount }),
  };
}

/** Reads and checks `portable-lb:environment` (an object) from the stack config. */
export function environmentFromConfig(config: pulumi.Config): Environment {
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
