// The environments users deploy to: `kubeconfig` adopts an existing cluster; the other provisioning
// kinds (onprem, aws, gcp) join as they are built. The lab (@portable-lb/lab) adds its own kind
// beside these for the stack's config.
import { PLATFORMS, ipv4Address, type ClusterEnvironment } from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { z } from "zod";
import { readKubeconfig } from "./kubeconfigFile.ts";

export const kubeconfigEnvironmentSchema = z.strictObject({
  kind: z.literal("kubeconfig"),
  kubeconfig: z.string({ error: "the path to a kubeconfig file is required, e.g. ~/.kube/config" }).min(1),
  /** Where that cluster runs; decides flannel's backend and whether cloud routes exist. */
  platform: z.enum(PLATFORMS).default("onprem"),
  /** The upstream routers that peer with our route reflectors, when the network offers BGP. */
  bgp: z
    .strictObject({ routers: z.array(ipv4Address).min(1, { error: "needs at least one router address" }) })
    .optional(),
  /** How many nodes carry the LB node label. */
  lbNodeCount: z.number().int().min(0).optional(),
});

export type KubeconfigEnvironmentConfig = z.output<typeof kubeconfigEnvironmentSchema>;

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
