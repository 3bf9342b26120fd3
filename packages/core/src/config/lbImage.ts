// The contract between the manifests and the LB container image (lb-image/Dockerfile): the commands
// it puts on PATH and where things are mounted. Both sides import these names.
export const DEFAULT_LB_IMAGE = "ghcr.io/portable-lb/lb:0.1.0";

export const LB_COMMANDS = {
  /** The controller: watches Services/EndpointSlices, programs IPVS or nftables, drives the speaker. */
  controller: "portable-lb-controller",
  /** Waits for the controller's first BIRD config, then runs BIRD in the foreground. */
  speaker: "portable-lb-speaker",
  /** Withdraws every announced VIP and waits until the withdrawal is sent (preStop of the speaker). */
  withdraw: "portable-lb-withdraw",
  /** Host-network node agent: routes the VIP pools from the node to its local LB pod. */
  nodeAgent: "portable-lb-node-agent",
} as const;

/** The label every LB pod carries: the Deployment's selector, and how the node agent finds its pod. */
export const LB_APP_LABEL = "portable-lb-controller";

export const LB_PATHS = {
  configDir: "/etc/portable-lb",
  configFile: "/etc/portable-lb/config.json",
  bgpPasswordDir: "/etc/portable-lb/bgp",
  bgpPasswordFile: "/etc/portable-lb/bgp/password",
  /** Shared by controller and speaker: BIRD's config and control socket. */
  birdRunDir: "/run/bird",
} as const;

/** The controller serves /healthz, /readyz and /prestop here, and /metrics on the metrics port. */
export const LB_HTTP_PATHS = {
  healthz: "/healthz",
  readyz: "/readyz",
  prestop: "/prestop",
  metrics: "/metrics",
} as const;
