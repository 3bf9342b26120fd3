// `environment` of kind "gcp": a kubeadm cluster on Compute Engine in a VPC network of its own, with
// one regional subnetwork (network.nodeCidr) and the machines spread over the listed zones. The plan is pure: checked at preview.
import { z } from "zod";
import { cloudEnvironmentPlan, type CloudNodePlan } from "./cloudNodePlan.ts";
import { checkZones, cloudEnvironmentShape } from "./environmentFields.ts";
import type { EnvironmentPlan } from "./provider.ts";

/** The cluster's VPC network: named, so cloud-routes mode knows it at preview. */
export function gcpNetworkName(clusterName: string): string {
  return `${clusterName}-network`;
}

const GCP_REGION = /^[a-z]+-[a-z]+\d{1,2}$/;

export const gcpEnvironmentSchema = z
  .strictObject({
    kind: z.literal("gcp"),
    project: z
      .string()
      .regex(/^[a-z][-a-z0-9]{4,28}[a-z0-9]$/, { error: "must be a GCP project id like my-project-123" }),
    region: z.string().regex(GCP_REGION, { error: "must be a GCP region like us-central1 or europe-west4" }),
    zones: z
      .array(z.string())
      .min(2, { error: 'needs at least two zones, e.g. ["us-central1-a", "us-central1-b"]' }),
    machineType: z
      .string()
      .regex(/^[a-z][a-z0-9]*-[a-z0-9-]+$/, { error: "must be a machine type like e2-standard-2" })
      .default("e2-standard-2"),
    image: z.string().min(1).default("debian-cloud/debian-12"),
    ...cloudEnvironmentShape,
  })
  .superRefine((env, ctx) => checkZones(ctx, env.region, GCP_REGION, env.zones, (r, l) => `${r}-${l}`));

export type GcpEnvironmentConfig = z.output<typeof gcpEnvironmentSchema>;

export type GcpPlan = EnvironmentPlan & CloudNodePlan & { platform: "gcp" };

/** One regional subnetwork, `nodeCidr` (GCP's smallest is a /29). */
export function gcpPlan(env: GcpEnvironmentConfig, nodeCidr: string): GcpPlan {
  return cloudEnvironmentPlan(
    "gcp",
    env,
    nodeCidr,
    { zonalSubnets: false, smallestSubnetPrefix: 29 },
    {
      cloud: "gcp",
      project: env.project,
      network: gcpNetworkName(env.name),
    },
  );
}
