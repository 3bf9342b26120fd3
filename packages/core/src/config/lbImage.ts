// The contract between the manifests and the LB container image (lb-image/image/build.sh): the commands
// it puts on PATH and where things are mounted. Both sides import these names.
import { standardLabels } from "../labels.ts";
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

/** The DSR fast path's loader (lb-image/fastpath, Go): the controller's child, and with `node` the agent's. */
export const FAST_PATH_LOADER = "portable-lb-fastpath";

/**
 * The stop sequence's bounds: the preStop hook (`portable-lb-withdraw`) takes this long at most; it
 * waits `controllerS` for the controller's withdrawal (which takes well under a second when the
 * controller works) and withdraws through BIRD's socket itself when none came. The controller's own
 * wait for the withdrawal (`withdrawS`) is shorter than the hook's, so the hook hears why it failed.
 */
export const LB_STOP_TIMEOUTS = { preStopS: 20, withdrawS: 15, controllerS: 5 } as const;

/** The label every LB pod carries: the Deployment's selector, and how the node agent finds its pod. */
export const LB_APP_LABEL = "portable-lb-controller";

/**
 * Every LB pod's labels (LB_APP_LABEL's `app` and the standard ones): the controller matches
 * NetworkPolicies' peers against them (direct server return's tunnel comes from the LB pods).
 */
export const LB_POD_LABELS: Readonly<Record<string, string>> = standardLabels("load-balancer", {
  app: LB_APP_LABEL,
});

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
  /** Shared by controller and speaker: the files of BIRD_RUN_FILES. */
  birdRunDir: "/run/bird",
  /**
   * The node agent's writable mount of the node's /proc/sys/net (a container's own /proc/sys is
   * read-only). Not under /proc: the runtime's default AppArmor profile denies writes there.
   */
  hostProcSysNet: "/host/proc/sys/net",
  /** The DSR fast path's backend-side program (lb-image/fastpath), which the node agent attaches. */
  dsrDecapObject: "/usr/lib/portable-lb/dsr_decap.o",
} as const;

/** Environment variables the manifests set for the LB image's processes, beside the downward API's. */
export const LB_ENV = {
  /** The node agent prepares DSR backends, finding pod network namespaces in this directory. */
  dsrNetnsDir: "DSR_NETNS_DIR",
} as const;

/** The files in LB_PATHS.birdRunDir, the emptyDir the controller and the speaker share. */
export const BIRD_RUN_FILES = {
  /** BIRD's config, rendered by the controller. */
  config: "bird.conf",
  /** BIRD's control socket. */
  socket: "bird.ctl",
  /** The controller's announcement lease (ANNOUNCEMENT_LEASE), which the speaker's watchdog follows. */
  lease: "announce.lease",
  /**
   * The running speaker's id, written before it starts BIRD. A renewal names the speaker whose BIRD
   * holds the controller's current decision; a restarted speaker's BIRD starts on an older config,
   * so its watchdog waits for a renewal naming it (the controller has configured it since).
   */
  speaker: "speaker.instance",
  /** The controller's presence socket: the speaker's watchdog stays connected, and learns of its death at once. */
  controllerSocket: "controller.sock",
  /**
   * The watchdog's verdict on the lease (`disabled yes;` or `disabled no;`), which the config's
   * `protocol static vips` includes, so a reconfigure keeps it. Next to the config: BIRD resolves
   * a relative include from the including file's folder.
   */
  vipsGate: "vips-gate.conf",
} as const;

/**
 * The announcement lease: while it vouches for what BIRD announces, the controller renews it every
 * `renewMs`; the speaker reads it every `checkMs` and withdraws every VIP once it has seen no
 * renewal for `ttlMs` (a hung controller: within ttlMs + checkMs of its last renewal), at once when
 * the controller revokes it (drain), and at once when the controller's process is gone (its
 * presence socket closes, BIRD_RUN_FILES.controllerSocket). The TTL covers a hang only: at 600 ms
 * a loaded 2-core machine (load 17) withdrew healthy pods, whose renewals paused up to 850 ms.
 */
export const ANNOUNCEMENT_LEASE = { renewMs: 200, ttlMs: 1_500, checkMs: 100 } as const;

/** The controller serves /healthz, /readyz and /prestop here, and /metrics on the metrics port. */
export const LB_HTTP_PATHS = {
  healthz: "/healthz",
  readyz: "/readyz",
  prestop: "/prestop",
  metrics: "/metrics",
  /**
   * The node agent's answer to an LB pod's node-route check: `/lb-pods/<pod IP>` tells whether the
   * node routes the VIP pools to that pod and whether the pod is Ready (200 when both, else 503).
   */
  lbPod: "/lb-pods/",
} as const;
