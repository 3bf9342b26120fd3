// `environment` of kind "aws": a kubeadm cluster on EC2 in a VPC of its own (network.nodeCidr), its
// subnets spread over the listed availability zones. The plan is pure: checked at preview.
import { z } from "zod";
import { cloudEnvironmentPlan, type CloudNodePlan } from "./cloudNodePlan.ts";
import { checkZones, cloudEnvironmentShape } from "./environmentFields.ts";
import type { EnvironmentPlan } from "./provider.ts";

const AWS_REGION = /^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$/;

export const awsEnvironmentSchema = z
  .strictObject({
    kind: z.literal("aws"),
    region: z.string().regex(AWS_REGION, { error: "must be an AWS region like us-east-1 or eu-central-1" }),
    /** At least two, so the LB nodes survive the loss of one. */
    zones: z
      .array(z.string())
      .min(2, { error: 'needs at least two availability zones, e.g. ["us-east-1a", "us-east-1b"]' }),
    instanceType: z
      .string()
      .regex(/^[a-z][a-z0-9-]*\.[a-z0-9]+$/, { error: "must be an EC2 instance type like t3.medium" })
      .default("t3.medium"),
    /** A Debian 12 or Ubuntu image; default the newest official Debian 12 (amd64) image of the region. */
    ami: z
      .string()
      .regex(/^ami-[0-9a-f]{8,17}$/, { error: "must be an AMI id like ami-0123456789abcdef0" })
      .optional(),
    ...cloudEnvironmentShape,
  })
  .superRefine((env, ctx) => checkZones(ctx, env.region, AWS_REGION, env.zones, (r, l) => `${r}${l}`));

export type AwsEnvironmentConfig = z.output<typeof awsEnvironmentSchema>;

export type AwsPlan = EnvironmentPlan & CloudNodePlan & { platform: "aws" };

/** Subnets and machines in the VPC `nodeCidr` (AWS takes VPCs from /16 to /28). */
export function awsPlan(env: AwsEnvironmentConfig, nodeCidr: string): AwsPlan {
  return cloudEnvironmentPlan(
    "aws",
    env,
    nodeCidr,
    {
      zonalSubnets: true,
      smallestSubnetPrefix: 28,
      largestPrefix: 16,
    },
    { cloud: "aws" },
  );
}
