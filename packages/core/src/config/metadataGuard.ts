// The cloud machines' metadata guard, as both of its owners name it: the bootstrap script creates the
// nft table that keeps pods from the instance metadata service (providers, bootstrap/metadataGuard.ts),
// and the node agent keeps its set of exempt addresses to the node's LB pods in the cloud-routes mode,
// where they take their cloud credentials from that service (lb-image, nodeAgent/metadataAccess.ts).
export const METADATA_GUARD = {
  /** `inet` family. */
  table: "portable_lb_metadata_guard",
  /** The node agent's: the addresses allowed through (ipv4_addr). */
  lbPodsSet: "lb_pods",
} as const;

/** Where the instance metadata service answers on AWS (IMDS) and GCE. */
export const INSTANCE_METADATA_ADDRESS = "169.254.169.254";
