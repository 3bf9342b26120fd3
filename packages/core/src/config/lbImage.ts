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

/**
 * The stop sequence's bounds: the preStop hook (`portable-lb-withdraw`) waits this long at most for
 * the controller's withdrawal; the controller's own wait for it is shorter, so the hook hears why.
 */
export const LB_STOP_TIMEOUTS = { preStopS: 20, withdrawS: 15 } as const;

/** The label every LB pod carries: the Deployment's selector, and how the node agent finds its pod. */
export const LB_APP_LABEL = "portable-lb-controller";

/**
 * The controller container's memory limit and the Node heap inside it. Left to itself, Node sizes
 * its heap from the machine and collects lazily, holding hundreds of MB it no longer uses; these
 * flags make it collect within the container's budget (the reconcile benchmark runs with the same
 * flags; README "Benchmark"). Old space is half the limit: the rest is Node's
 * own code and buffers, and the nft processes the controller runs, which count in its cgroup too.
 */
export const CONTROLLER_MEMORY = {
  requestMi: 128,
  limitMi: 512,
  nodeOptions: "--max-old-space-size=256 --max-semi-space-size=4",
} as const;

export const LB_PATHS = {
  configDir: "/etc/portable-lb",
  configFile: "/etc/portable-lb/config.json",
  /** In the config's volume (a Secret projected beside the ConfigMap). */
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
