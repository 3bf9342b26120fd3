// Wires the controller together: config, API clients, allocator election, watches, reconciler,
// engine, HTTP endpoints. Used by main.ts in the pod and by tests in-process.
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { LbConfig } from "@portable-lb/core/config";
import type { Server } from "node:http";
import type { Logger } from "pino";
import { chooseEngine } from "../dataplane/chooseEngine.ts";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import { LocalVips } from "../dataplane/localVips.ts";
import { ClusterWatch } from "./clusterWatch.ts";
import { EventSink } from "./eventSink.ts";
import { startHttpServer } from "./httpServer.ts";
import { LeaderElector, type LeaseTiming } from "./leaderElection.ts";
import { ControllerMetrics } from "./metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { statusWriter } from "./statusWriter.ts";

export const ALLOCATOR_LEASE = "portable-lb-allocator";

export interface ControllerOptions {
  config: LbConfig;
  kubeconfig: KubeConfig;
  log: Logger;
  /** The controller's own namespace (its Lease lives there) and identity (its pod name). */
  namespace: string;
  identity: string;
  /** Run the kernel tools through a prefix (e.g. `ip netns exec NS`); in the pod, none. */
  commandPrefix?: string[];
  engine?: DataPlaneEngine;
  leaseTiming?: LeaseTiming;
  /** Where the HTTP endpoints listen; the config's health port by default, 0 for any. */
  httpPort?: number;
  httpHost?: string;
}

export interface RunningController {
  reconciler: Reconciler;
  metrics: ControllerMetrics;
  server: Server;
  elector: LeaderElector;
  stop(): Promise<void>;
}

function withPrefix(prefix: string[], tool: string): [string, ...string[]] {
  const [first = tool, ...rest] = [...prefix, tool];
  return [first, ...rest];
}

export async function startController(o: ControllerOptions): Promise<RunningController> {
  const prefix = o.commandPrefix ?? [];
  const metrics = new ControllerMetrics();
  const core = o.kubeconfig.makeApiClient(CoreV1Api);
  const events = new EventSink(core, o.log);
  const engine =
    o.engine ??
    chooseEngine(o.config.dataPlane.mode, undefined, {
      ipvsadm: withPrefix(prefix, "ipvsadm"),
      nft: withPrefix(prefix, "nft"),
    });
  o.log.info({ engine: engine.name }, "data plane engine chosen");

  // The callbacks below run only after start(), when `reconciler` exists.
  const elector = new LeaderElector({
    api: o.kubeconfig.makeApiClient(CoordinationV1Api),
    namespace: o.namespace,
    name: ALLOCATOR_LEASE,
    identity: o.identity,
    ...(o.leaseTiming && { timing: o.leaseTiming }),
    onChange: (leading) => {
      metrics.leader.set(leading ? 1 : 0);
      o.log.info({ leading }, leading ? "elected VIP allocator" : "not the VIP allocator");
      reconciler.trigger();
    },
    onError: (err) => o.log.warn({ err }, "leader election failed; not allocating until it succeeds"),
  });
  const watch = new ClusterWatch(o.kubeconfig, o.log, {
    onChange: () => reconciler.trigger(),
    onConnection: (up) => metrics.apiConnected.set(up ? 1 : 0),
  });
  const reconciler = new Reconciler({
    config: o.config,
    view: watch,
    engine,
    localVips: new LocalVips(
      o.config.vipPools.map((p) => p.cidr),
      withPrefix(prefix, "ip"),
    ),
    metrics,
    log: o.log,
    report: (problems) => events.report(problems),
    writeStatus: statusWriter(core),
    isLeader: () => elector.isLeader,
  });
  const server = await startHttpServer(
    o.httpPort ?? o.config.ports.health,
    { ready: () => reconciler.applied, drain: () => Promise.resolve() },
    metrics.registry,
    o.httpHost,
  );
  elector.start();
  await watch.start();
  return {
    reconciler,
    metrics,
    server,
    elector,
    async stop() {
      reconciler.stop();
      await elector.stop();
      await watch.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
