// Where a cluster runs. It decides what the network underneath can do: on premises and in the lab
// nodes share an L2/L3 network we control; in AWS and GCP a cloud gateway sits between VMs.
export const PLATFORMS = ["onprem", "lab", "aws", "gcp"] as const;
export type Platform = (typeof PLATFORMS)[number];

/** True where a cloud gateway routes between nodes and drops traffic to addresses it does not know. */
export function hasCloudGateway(platform: Platform): boolean {
  return platform === "aws" || platform === "gcp";
}
