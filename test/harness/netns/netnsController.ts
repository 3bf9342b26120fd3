// The real LB controller, in-process, programming the kernel of a lab namespace (as its pod's),
// with quick allocator leases: how the controller's integration tests start it.
import type { KubeConfig } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { LabNamespace } from "@portable-lb/lab";
import { pino } from "pino";
import { startController, type RunningController } from "../../../lb-image/src/controller/controller.ts";
import { fastPathBuild } from "../fastPathBuild.ts";

export function startNetnsController(o: {
  config: LbConfig;
  kubeconfig: KubeConfig;
  /** The LB pods' namespace (its allocator Lease lives there). */
  namespace: string;
  /** The LB pod's network namespace. */
  pod: LabNamespace;
  identity?: string;
  /** Runs the kernel tools through this instead of `ip netns exec <pod>` (e.g. a counting wrapper). */
  commandPrefix?: string[];
  routesWatchedMs?: number;
}): Promise<RunningController> {
  return startController({
    config: o.config,
    kubeconfig: o.kubeconfig,
    log: pino({ level: "warn" }),
    namespace: o.namespace,
    identity: o.identity ?? "lb-1",
    commandPrefix: o.commandPrefix ?? ["ip", "netns", "exec", o.pod.netns],
    // The bootstrap's build of the DSR fast path (the image's), run through the same prefix.
    fastPathBinary: fastPathBuild().loader,
    ...(o.routesWatchedMs !== undefined && { routesWatchedMs: o.routesWatchedMs }),
    httpPort: 0,
    httpHost: "127.0.0.1",
    leaseTiming: { leaseDurationS: 3, retryPeriodMs: 300 },
  });
}
