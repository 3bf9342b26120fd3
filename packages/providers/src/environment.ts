// The environments users deploy to: `kubeconfig` adopts an existing cluster; `onprem`, `aws` and
// `gcp` provision one (provider.ts says what each hands back). The lab (@portable-lb/lab) adds its
// own kind beside these for the stack's config.
import { PLATFORMS, type ClusterEnvironment, type EnvironmentFacts } from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { awsEnvironmentSchema, awsPlan, type AwsEnvironmentConfig } from "./awsEnvironment.ts";
import { bgpPeersSchema } from "./environmentFields.ts";
import { gcpEnvironmentSchema, gcpPlan, type GcpEnvironmentConfig } from "./gcpEnvironment.ts";
import { readKubeconfig } from "./kubeconfigFile.ts";
import { onpremEnvironmentSchema, onpremPlan, type OnpremEnvironmentConfig } from "./onpremEnvironment.ts";
import { lbNodesOf, planRouting, type EnvironmentPlan } from "./provider.ts";

export const kubeconfigEnvironmentSchema = z.strictObject({
  kind: z.literal("kubeconfig"),
  kubeconfig: z.string({ error: "the path to a kubeconfig file is required, e.g. ~/.kube/config" }).min(1),
  /** Where that cluster runs; decides flannel's backend and whether cloud routes exist. */
  platform: z.enum(PLATFORMS).default("onprem"),
  bgp: bgpPeersSchema.optional(),
  /** How many nodes carry the LB node label. */
  lbNodeCount: z.number().int().min(0).optional(),
});

export type KubeconfigEnvironmentConfig = z.output<typeof kubeconfigEnvironmentSchema>;

/** The kinds that provision their own cluster. */
export type ProvisioningEnvironmentConfig =
  OnpremEnvironmentConfig | AwsEnvironmentConfig | GcpEnvironmentConfig;

/**
 * `environment` with every kind of this package and the caller's own (the lab's): an unknown kind
 * is named with the list of known ones.
 */
export function environmentSchemaWith<const Extra extends readonly z.core.$ZodTypeDiscriminable[]>(
  ...extra: Extra
) {
  const options = [
    kubeconfigEnvironmentSchema,
    onpremEnvironmentSchema,
    awsEnvironmentSchema,
    gcpEnvironmentSchema,
    ...extra,
  ] as const;
  const kinds = options.map((o) => `"${String([...o._zod.propValues.kind!][0])}"`);
  return z.discriminatedUnion("kind", options, {
    error: `unknown environment kind; set environment.kind to one of ${kinds.join(", ")}`,
  });
}

/** What a provisioning environment will be, from its config and the node network; ConfigError if it cannot. */
export function planEnvironment(env: ProvisioningEnvironmentConfig, nodeCidr: string): EnvironmentPlan {
  switch (env.kind) {
    case "onprem":
      return onpremPlan(env, nodeCidr);
    case "aws":
      return awsPlan(env, nodeCidr);
    case "gcp":
      return gcpPlan(env, nodeCidr);
  }
}

/** What the cluster checks need to know of a planned environment. */
export function planFacts(plan: EnvironmentPlan): EnvironmentFacts {
  return {
    platform: plan.platform,
    lbNodeCount: lbNodesOf(plan.nodes).length,
    ...planRouting(plan),
    ...(plan.cloudRoutes && { cloudRoutes: plan.cloudRoutes }),
  };
}

/**
 * A resolved environment. Its kubeconfig is the file's contents, kept secret in state (the lab's is
 * the path of its own file).
 */
export type Environment = ClusterEnvironment & { kubeconfig: pulumi.Output<string> };

export function resolveEnvironment(config: KubeconfigEnvironmentConfig): Environment {
  return {
    kind: config.kind,
    platform: config.platform,
    kubeconfig: pulumi.secret(readKubeconfig(config.kubeconfig).contents),
    ...(config.bgp && { bgp: config.bgp }),
    ...(config.lbNodeCount !== undefined && { lbNodeCount: config.lbNodeCount }),
  };
}
