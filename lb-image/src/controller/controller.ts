// Wires the controller together: config, API clients, allocator election, watches, reconciler,
// engine, HTTP endpoints. Used by main.ts in the pod and by tests in-process.
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { FAST_PATH_LOADER, LB_STOP_TIMEOUTS, usesFastPath, type LbConfig } from "@portable-lb/core/config";
import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { Announcer, type AnnouncerTiming } from "../announce/announcer.ts";
import { probeNodeRoute } from "../announce/nodeRouteProbe.ts";
import { AnnouncementLease, speakerInstance } from "../bgp/announcementLease.ts";
import { ControllerPresence } from "../bgp/controllerPresence.ts";
import type { BirdClients } from "../bgp/birdControl.ts";
import { SessionMonitor } from "../bgp/sessionMonitor.ts";
import { SpeakerControl } from "../bgp/speakerControl.ts";
import { startCloudRoutes } from "../cloudRoutes/cloudRoutes.ts";
import { chooseEngine, ipvsSupport } from "../dataplane/chooseEngine.ts";
import type { DataPlaneEngine } from "../dataplane/engine.ts";
import { withPrefix } from "../dataplane/exec.ts";
import { FastPath } from "../dataplane/fastpath/fastPath.ts";
import { FastPathEngine } from "../dataplane/fastpath/fastPathEngine.ts";
import { uplinkDevice } from "../dataplane/fastpath/uplinkDevice.ts";
import { LocalVips } from "../dataplane/localVips.ts";
import { RouteWatch } from "../dataplane/routeWatch.ts";
import { flushStaleUdpFlows } from "../dataplane/staleUdpFlows.ts";
import { HealthChecker } from "../health/healthChecker.ts";
import { probe, type Probe } from "../health/probe.ts";
import { ClusterWatch } from "./clusterWatch.ts";
import { waitForQuiet } from "./connectionDrain.ts";
import { lbPeers } from "./dsrPolicy.ts";
import { EventSink } from "./eventSink.ts";
import { startHttpServer } from "./httpServer.ts";
import { LeaderElector, allocatorLease, type LeaseTiming } from "./leaderElection.ts";
import { ControllerMetrics } from "./metrics.ts";
import { Reconciler } from "./reconciler.ts";
import { finalizerWriter, statusWriter } from "./statusWriter.ts";

function bgpSpeaker(o: ControllerOptions, registry: Registry): SpeakerControl | undefined {
  const bgp = o.config.bgp;
  if (o.config.routingMode !== "bgp" || !bgp || !o.speaker) return undefined;
  return new SpeakerControl({
    base: {
      routerId: o.speaker.podIp,
      asn: bgp.asn,
      routeReflectors: bgp.routeReflectors,
      nextHop: o.speaker.nodeIp,
      bfd: bgp.bfd,
      timers: bgp.timers,
      gracefulRestartS: bgp.gracefulRestartS,
      ...(bgp.passwordFile && { password: readFileSync(bgp.passwordFile, "utf8").trim() }),
    },
    runDir: o.speaker.runDir,
    lease: new AnnouncementLease({ runDir: o.speaker.runDir, holder: "controller", registry, log: o.log }),
    ...(o.speaker.bird && { bird: o.speaker.bird }),
    ...(o.speaker.clients && { clients: o.speaker.clients }),
  });
}

export interface ControllerOptions {
  config: LbConfig;
  kubeconfig: KubeConfig;
  log: Logger;
  /** The controller's own namespace (its Lease lives there) and identity (its pod name). */
  namespace: string;
  identity: string;
  /** Its pod's uid, which Events on the pod need to show in `kubectl describe`. */
  podUid?: string;
  /** The Node it runs on: cloud-routes mode finds its instance from the Node's providerID. */
  nodeName?: string;
  /** Run the kernel tools through a prefix (e.g. `ip netns exec NS`); in the pod, none. */
  commandPrefix?: string[];
  engine?: DataPlaneEngine;
  /** The DSR fast path's loader (lb-image/fastpath); by default the image's, found on PATH. */
  fastPathBinary?: string;
  /** How active health checks reach backends; by default from this process's network namespace. */
  probe?: Probe;
  leaseTiming?: LeaseTiming;
  /** BGP mode: this pod's and its node's addresses, and where BIRD's config and socket live. */
  speaker?: {
    podIp: string;
    nodeIp: string;
    runDir: string;
    bird?: [string, ...string[]];
    clients?: BirdClients;
  };
  /** The Announcer's checks and lease (tests shorten them). */
  announcerTiming?: Partial<AnnouncerTiming>;
  /** How often the routes are read back while `ip monitor` listens (routeWatch.ts; tests lengthen it). */
  routesWatchedMs?: number;
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

export async function startController(o: ControllerOptions): Promise<RunningController> {
  const prefix = o.commandPrefix ?? [];
  const metrics = new ControllerMetrics();
  const core = o.kubeconfig.makeApiClient(CoreV1Api);
  const events = new EventSink(core, o.log);
  const pod = { object: `${o.namespace}/${o.identity}`, kind: "Pod" as const, uid: o.podUid };
  const choice = o.engine
    ? { engine: o.engine, reason: "given" }
    : chooseEngine(
        // Either engine serves DSR: IPVS in tunnel mode (IPIP) where forced, else nftables (VXLAN,
        // dataplane/dsr/), which asks nothing of the backends' kernels; the node agent prepares
        // IPIP decapsulation and NetworkPolicies are judged (dsrPolicy.ts) by the same rule.
        o.config.dataPlane.mode === "dsr" && o.config.dataPlane.engine === "auto"
          ? "nftables"
          : o.config.dataPlane.engine,
        await ipvsSupport(prefix),
        prefix,
      );
  const fastPath =
    !o.engine && choice.engine.name === "nftables" && usesFastPath(o.config.dataPlane)
      ? new FastPathEngine(choice.engine, {
          start: async () =>
            FastPath.start({
              binary: o.fastPathBinary ?? FAST_PATH_LOADER,
              device: await uplinkDevice(prefix),
              prefix,
            }),
          log: o.log,
          registry: metrics.registry,
          onProblem: (message) => void events.report([{ ...pod, reason: "FastPathUnavailable", message }]),
        })
      : undefined;
  const engine: DataPlaneEngine = fastPath ?? choice.engine;
  metrics.dataPlaneEngine.set({ engine: engine.name, reason: choice.reason }, 1);
  o.log.info({ engine: engine.name, reason: choice.reason }, "data plane engine chosen");
  if ("warning" in choice && choice.warning)
    void events.report([{ ...pod, reason: "DataPlaneFallback", message: choice.warning }]);

  // The callbacks below run only after start(), when `reconciler` exists.
  const elector = new LeaderElector({
    api: o.kubeconfig.makeApiClient(CoordinationV1Api),
    namespace: o.namespace,
    name: allocatorLease(o.config.loadBalancerClass),
    identity: o.identity,
    ...(o.leaseTiming && { timing: o.leaseTiming }),
    onChange: (leading) => {
      metrics.leader.set(leading ? 1 : 0);
      o.log.info({ leading }, leading ? "elected VIP allocator" : "not the VIP allocator");
      reconciler.trigger();
    },
    onError: (err) => o.log.warn({ err }, "leader election failed; not allocating until it succeeds"),
  });
  const dsr = o.config.dataPlane.mode === "dsr" ? lbPeers(o.config, o.namespace) : undefined;
  const watch = new ClusterWatch(
    o.kubeconfig,
    o.log,
    {
      onChange: () => reconciler.trigger(),
      onConnection: (up) => metrics.apiConnected.set(up ? 1 : 0),
    },
    dsr,
  );
  const health = new HealthChecker({
    probe: o.probe ?? probe,
    onChange: () => reconciler.trigger(),
    log: o.log,
    onResult: (ok) => metrics.healthChecks.inc({ result: ok ? "pass" : "fail" }),
  });
  metrics.observeUnhealthy(() => health.unhealthyCount());
  metrics.observeVipConnections(() => engine.counters());
  const speaker = bgpSpeaker(o, metrics.registry);
  const sessions =
    speaker &&
    new SessionMonitor({
      bird: speaker.bird,
      reflectors: o.config.bgp!.routeReflectors,
      registry: metrics.registry,
      onDrop: (peer, info) =>
        void events.report([
          {
            ...pod,
            reason: "BGPSessionDown",
            message: `BGP session to route reflector ${peer} went down (${info}); its routes to this pod's VIPs are withdrawn until it is back`,
          },
        ]),
      // The sink sends each distinct problem once per ten minutes, however often it is seen.
      onProblem: (peer, problem) =>
        void events.report([
          {
            ...pod,
            reason: "BGPSessionNotEstablished",
            message: `BGP session to route reflector ${peer} is not established: ${problem}; BIRD keeps retrying, and this pod's data plane keeps serving`,
          },
        ]),
    });
  const announcer =
    speaker &&
    sessions &&
    new Announcer({
      pools: o.config.vipPools.map((p) => p.cidr),
      reflectors: o.config.bgp!.routeReflectors,
      podIp: o.speaker!.podIp,
      nodeIp: o.speaker!.nodeIp,
      nodeAgentPort: o.config.ports.nodeAgent,
      pod,
      target: speaker,
      lease: speaker.lease,
      // The Announcer's tick is the session monitor's poll too (its metrics and Events).
      sessions: async () => {
        const state = await sessions.poll();
        if (state.vipsEnabled === undefined) throw new Error("BIRD did not answer");
        return new Map(
          state.reflectors.map((r) => [r.peer, { established: r.established, bfdUp: r.bfd?.state === "Up" }]),
        );
      },
      speakerInstance: () => speakerInstance(o.speaker!.runDir),
      probe: probeNodeRoute,
      registry: metrics.registry,
      log: o.log,
      report: (problems) => events.report(problems),
      ...(o.announcerTiming && { timing: o.announcerTiming }),
    });
  // cloud-routes mode: the cloud's route tables point each VIP at a live LB pod's instance.
  const routes =
    o.config.routingMode === "cloud-routes"
      ? await startCloudRoutes({
          config: o.config,
          kubeconfig: o.kubeconfig,
          log: o.log,
          namespace: o.namespace,
          identity: o.identity,
          nodeName: o.nodeName ?? "",
          pod,
          registry: metrics.registry,
          report: (items, type) => events.report(items, type),
        })
      : undefined;
  const reconciler = new Reconciler({
    config: o.config,
    view: watch,
    engine,
    localVips: new LocalVips(
      o.config.vipPools.map((p) => p.cidr),
      withPrefix(prefix, "ip"),
    ),
    routes: new RouteWatch(withPrefix(prefix, "ip"), {
      ...(o.routesWatchedMs !== undefined && { watchedMs: o.routesWatchedMs }),
      onError: (err) =>
        o.log.warn({ err }, "ip monitor stopped; reading the routes back at every check until it is back"),
    }),
    metrics,
    log: o.log,
    report: (items, type, opts) => events.report(items, type, opts),
    pod,
    ...(dsr && { lbPeers: dsr }),
    flushStaleUdp: (flows) => flushStaleUdpFlows(prefix, flows),
    writeStatus: statusWriter(core),
    writeFinalizer: finalizerWriter(core, o.config.loadBalancerClass),
    isLeader: () => elector.isLeader,
    health,
    ...(announcer && { announce: (vips: string[]) => announcer.setCandidates(vips) }),
    ...(routes && {
      announce: (vips: string[], heldBack: ReadonlySet<string>) =>
        routes.setVips(vips, watch.services(), heldBack),
    }),
  });
  // In the pod, Prometheus scrapes the metrics port and the kubelet probes the health port; a test
  // that picks its own port gets everything there.
  const metricsServer =
    o.httpPort === undefined
      ? await startHttpServer(o.config.ports.metrics, undefined, metrics.registry, o.httpHost)
      : undefined;
  const server = await startHttpServer(
    o.httpPort ?? o.config.ports.health,
    {
      live: () => reconciler.dataPlaneLive(),
      ready: () => reconciler.applied,
      drain: () => withdraw(),
    },
    metrics.registry,
    o.httpHost,
  );
  // preStop's step, and the stop's first one when a SIGTERM comes without it (idempotent).
  const withdraw = () => announcer?.drain(LB_STOP_TIMEOUTS.withdrawS * 1000) ?? Promise.resolve();
  /** Serves on after the withdrawal until the router has moved new flows away (connectionDrain.ts). */
  const drainConnections = async () => {
    if (!announcer) return; // only BGP mode has a withdrawal to drain after
    await withdraw().catch((err: unknown) => o.log.error({ err }, "withdrawal failed; draining anyway"));
    const { drain } = o.config;
    o.log.info(drain, "draining: serving until no new connection arrives");
    const result = await waitForQuiet({
      quietMs: drain.quietS * 1000,
      timeoutMs: drain.timeoutS * 1000,
      connections: async () => (await engine.counters()).reduce((n, c) => n + c.connections, 0),
      onError: (err) => o.log.warn({ err }, "cannot read the connection counters; draining on"),
    });
    o.log.info(result, result.quiet ? "drained" : "drain timed out; connections still arrived");
  };
  // From here on the speaker's watchdog sees this process; its death closes the socket at once.
  const presence = speaker && (await ControllerPresence.listen(o.speaker!.runDir));
  elector.start();
  announcer?.start();
  // Reads the data plane back and repairs drift, API server or not (the same runner applies).
  reconciler.startVerifying();
  await watch.start();
  return {
    reconciler,
    metrics,
    server,
    elector,
    async stop() {
      // Hands this pod's VIPs to the other LB pods first, so they move at once.
      await routes?.stop();
      // The reconciler keeps applying backend changes while the pod drains.
      await drainConnections();
      reconciler.stop();
      // Its program detaches; the kernel path beneath serves on while the pod's last flows end.
      await fastPath?.stop();
      await announcer?.stop();
      await presence?.close();
      health.stop();
      sessions?.stop();
      await elector.stop();
      await watch.stop();
      for (const s of [server, metricsServer])
        if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}
