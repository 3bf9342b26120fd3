// The LB image a deployment runs. No public registry serves it, so there is no default to fall back
// on: every deployment names its own build (or the environment provides one, as the lab does), and a
// missing one fails at `pulumi preview` instead of leaving the LB pods in ImagePullBackOff.
import { z } from "zod";

export const LB_IMAGE_FIX =
  "build and push the LB image with 'npm run image -- --push <your-registry>/portable-lb/lb:<tag>' and set loadBalancer.image to that reference (lb-image/README.md, Building)";

export const lbImageRef = z
  .string({ error: `is required, as no public LB image exists; ${LB_IMAGE_FIX}` })
  .regex(/^[^\s]+$/, {
    error: `must be an image reference such as registry.example.com/portable-lb/lb:0.1.0; ${LB_IMAGE_FIX}`,
  });
