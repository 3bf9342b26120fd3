// The node agent: runs on every LB node in the node's own network namespace (hostNetwork) and keeps
// the node's routes for the VIP pools pointing at the node's LB pod, following that pod's readiness.
// It only reads Pods of the LB namespace on its own node. When the API server goes away, the routes
// stay as they are; nothing is applied before the first complete list, so a restart adopts them.
// It also answers the LB pod's node-route check (`/lb-pods/<pod IP>`, see lbPodVerdict): the pod
// asks from a VIP address, so an answer that reaches it proves the route, and the body relays the
// pod's Ready condition, which only the API server knows (e.g. false once the node's kubelet died).
// With direct server return it runs on every node, prepares the local backend pods and untracks
// forwarded DSR VIP traffic on every node, LB nodes too (dsr/dsrApplier.ts), following Services,
// EndpointSlices and NetworkPolicies. On cloud machines it lets its node's LB pods through the
// metadata guard in the cloud-routes mode (metadataAccess.ts).
import { CoordinationV1Api, CoreV1Api, Watch, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { LB_APP_LABEL, LB_HTTP_PATHS, type LbConfig } from "@portable-lb/core/config";
import type { Server } from "node:http";
import type { Logger } from "pino";
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { CoalescingRunner } from "../common/coalescingRunner.ts";
import { CommandMonitor } from "../common/commandMonitor.ts";
import { nodesWithoutIpip, recordIpipDecap, saidOf } from "../common/ipipDecap.ts";
import { startHttpServer, type ExtraEndpoint } from "../controller/httpServer.ts";
import { withPrefix } from "../dataplane/exec.ts";
import { serviceInformers } from "../controller/clusterWatch.ts";
import { desiredState, isOurs } from "../controller/desiredState.ts";
import { acceptedPeers } from "../controller/handover.ts";
import { lbPeers } from "../controller/dsrPolicy.ts";
import { EventSink } from "../controller/eventSink.ts";
import { ResilientInformers } from "../kube/informers.ts";
import { DsrApplier } from "./dsr/dsrApplier.ts";
import { withStartingBackends } from "./dsr/startingBackends.ts";
import { unreachableBackendEvents } from "./dsr/unreachableBackendEvents.ts";
import { desiredRoutes, lbPodState, lbPodVerdict, routedVia, type NodeRoute } from "./desiredRoutes.ts";
import { applySteering } from "./podSteering.ts";
import { applyMetadataAccess, desiredMetadataAccess } from "./metadataAccess.ts";
import { LbNodeFastPath } from "./lbNodeFastPath.ts";
import { nodeForwards } from "./nodeForwarding.ts";
import { NodeFastPath } from "../dataplane/fastpath/nodeFastPath.ts";
import { uplinkDevice } from "../dataplane/fastpath/uplinkDevice.ts";
import { NodeRoutes } from "./nodeRoutes.ts";

const LB_POD_SELECTOR = `app=${LB_APP_LABEL}`;

export interface NodeAgentOptions {
  config: LbConfig;
  kubeconfig: KubeConfig;
  log: Logger;
  nodeName: string;
  /** The LB pods' namespace. */
  namespace: string;
  /** Run `ip` through a prefix (e.g. `ip netns exec NS`); on a node, none. */
  commandPrefix?: string[];
  httpPort?: number;
  httpHost?: string;
  /**
   * How often the routes, the node's forwarding and the BFD steering are checked again without a
   * Pod change or news from `ip monitor` (which reports route and forwarding changes at once).
   */
  resyncMs?: number;
  /** Direct server return's node side (see dsr/dsrApplier.ts); without it, none. */
  dsr?: NodeAgentDsr;
}

export interface NodeAgentDsr {
  /** The container runtime's directory of pod network namespaces. */
  netnsDir: string;
  /** A writable mount of the node's /proc/sys/net. */
  procSysNet: string;
  /** How often the pods' and the node's DSR state is read back and repaired without a change. */
  resyncMs?: number;
  /** The backend pods' tc BPF decapsulation object (DsrApplierOptions.decapObject); without it, none. */
  decapObject?: string;
  /**
   * The fast path's loader (`portable-lb-fastpath`), run as `node` on a node with LB pods
   * (lbNodeFastPath.ts); without it, none.
   */
  fastPathBinary?: string;
}

// Reading back every DSR pod's state costs two commands per pod: less often than the routes.
const DEFAULT_DSR_RESYNC_MS = 10_000;

// The node's table is not ours alone: a pod bridge that goes down takes the routes through it along,
// a CNI restart recreates the bridge, and anyone with NET_ADMIN can delete a route. `ip monitor`
// reports such changes (and the node's forwarding turning) at once, and a run puts the routes back
// (the LB pod withdraws its VIPs while its route is missing, and announces again once repaired).
// The periodic check is the safety net (three reads when nothing changed): every 30 s while the
// monitor listens, every 2 s while it is being restarted.
const DEFAULT_RESYNC_MS = 30_000;
const UNMONITORED_RESYNC_MS = 2_000;

export interface RunningNodeAgent {
  routes: NodeRoutes;
  registry: Registry;
  server: Server;
  /** True once the routes reflect a complete list of the LB pods. */
  applied(): boolean;
  /** The node forwards IPv4 (as of the last update); without it the routes carry nothing. */
  forwarding(): boolean;
  stop(): Promise<void>;
}

function nodeAgentMetrics(registry: Registry) {
  collectDefaultMetrics({ register: registry });
  return {
    routes: new Gauge({
      name: "portable_lb_node_routes",
      help: "VIP pool routes on this node pointing at a local LB pod",
      registers: [registry],
    }),
    nextHops: new Gauge({
      name: "portable_lb_node_route_next_hops",
      help: "LB pods the VIP pools are routed to on this node",
      registers: [registry],
    }),
    changes: new Counter({
      name: "portable_lb_node_route_changes_total",
      help: "Routes replaced or removed",
      registers: [registry],
    }),
    errors: new Counter({
      name: "portable_lb_node_route_errors_total",
      help: "Route updates that failed (the last good routes stay)",
      registers: [registry],
    }),
    forwarding: new Gauge({
      name: "portable_lb_node_ip_forward",
      help: "1 while the node forwards IPv4 (net.ipv4.ip_forward), which VIP traffic needs",
      registers: [registry],
    }),
    apiConnected: new Gauge({
      name: "portable_lb_api_connected",
      help: "1 while the watch on the API server is up (0: keeping the last known routes)",
      registers: [registry],
    }),
  };
}

export async function startNodeAgent(o: NodeAgentOptions): Promise<RunningNodeAgent> {
  const registry = new Registry();
  const metrics = nodeAgentMetrics(registry);
  const ip = withPrefix(o.commandPrefix ?? [], "ip");
  const routes = new NodeRoutes(ip);
  const core = o.kubeconfig.makeApiClient(CoreV1Api);
  const fieldSelector = `spec.nodeName=${o.nodeName}`;
  const informers = new ResilientInformers(o.log, {
    onChange: () => {
      runner.trigger();
      dsrRunner?.trigger();
    },
    onConnection: (up) => metrics.apiConnected.set(up ? 1 : 0),
  });
  const pods = informers.add<V1Pod>("pods", {
    path: `/api/v1/namespaces/${o.namespace}/pods`,
    watch: new Watch(o.kubeconfig),
    list: (page) =>
      core.listNamespacedPod({
        namespace: o.namespace,
        labelSelector: LB_POD_SELECTOR,
        fieldSelector,
        ...page,
      }),
    labelSelector: LB_POD_SELECTOR,
    fieldSelector,
  });
  const dsr = o.dsr && startDsr(o, o.dsr, informers, registry);
  const dsrRunner = dsr?.runner;
  const pools = o.config.vipPools.map((p) => p.cidr);
  const binary = o.dsr?.fastPathBinary;
  const nodeFast =
    dsr && binary !== undefined
      ? new LbNodeFastPath({
          start: () => NodeFastPath.start({ binary, ...(o.commandPrefix && { prefix: o.commandPrefix }) }),
          peerIfindex: (podIp) => dsr.applier.peerIfindex(podIp),
          uplink: () => uplinkDevice(o.commandPrefix),
          pools,
          log: o.log,
          registry,
        })
      : undefined;
  const reflectors = o.config.routingMode === "bgp" ? (o.config.bgp?.routeReflectors ?? []) : [];
  const nft = withPrefix(o.commandPrefix ?? [], "nft");
  let applied = false;
  /** The routes as last applied (what the kernel holds, give or take a foreign change until the next run). */
  let routed: NodeRoute[] = [];
  // Unknown until the first run; logged when it turns (or starts) off.
  let forwarding: boolean | undefined;
  /** Whether the node has the metadata guard (metadataAccess.ts), until a run finds it has not. */
  let guarded = true;
  /** When the last run started: the periodic check waits resyncMs after any run. */
  let lastRun = performance.now();
  const runner = new CoalescingRunner(
    async () => {
      lastRun = performance.now();
      const forwards = await nodeForwards(ip);
      if (!forwards && forwarding !== false)
        o.log.error(
          "the node does not forward IPv4 (net.ipv4.ip_forward=0): VIP traffic cannot reach the LB pod",
        );
      forwarding = forwards;
      metrics.forwarding.set(forwards ? 1 : 0);
      if (!informers.synced()) return;
      const current = await routes.current();
      const want = desiredRoutes(o.nodeName, pods.list().map(lbPodState), pools, routedVia(current));
      const changes = await routes.apply(want, current);
      routed = want;
      nodeFast?.update(want.flatMap((r) => r.via));
      // The reflectors' BFD packets, and the flows other platforms' LB nodes relay here in a
      // handover, follow the pools: to the pod they are routed to (podSteering.ts).
      const steering = { reflectors, podIp: want[0]?.via[0], handoverPeers: dsr?.handoverPeers() ?? [] };
      if (await applySteering(nft, steering))
        o.log.info(steering, "reflectors' BFD and relayed flows steered");
      // Apart from the routes, as the guard below: a pod whose namespace cannot be entered now is
      // tried again at the next run.
      if (steering.podIp && steering.handoverPeers.length > 0)
        await dsr?.applier.openRelayTarget(steering.podIp).catch((err: unknown) => {
          o.log.error(
            { err, podIp: steering.podIp },
            "the LB pod's rp_filter for relayed flows could not be checked",
          );
        });
      const access = desiredMetadataAccess(
        o.config.routingMode,
        pods.list().flatMap((p) => p.status?.podIP ?? []),
      );
      // Apart from the routes: they must not wait for, or be reported failed by, the guard's set.
      // A node found without the guard stays so (it is loaded at boot, before the kubelet starts
      // this agent): not asked again at every run, which `ip monitor`'s news make frequent.
      try {
        const result = guarded ? await applyMetadataAccess(nft, access) : "unguarded";
        guarded = result !== "unguarded";
        if (result === "changed") o.log.info({ access }, "LB pods let through the node's metadata guard");
      } catch (err) {
        o.log.error(
          { err, access },
          "the metadata guard's LB pod set could not be updated; it stays as it was",
        );
      }
      applied = true;
      metrics.changes.inc(changes);
      metrics.routes.set(want.length);
      metrics.nextHops.set(want[0]?.via.length ?? 0);
      if (changes) o.log.info({ routes: want, changes }, "node routes updated");
    },
    {
      onError: (err) => {
        metrics.errors.inc();
        o.log.error({ err }, "node route update failed; the last good routes stay");
      },
    },
  );
  const lbPodAnswer: ExtraEndpoint = (path) => {
    if (!path.startsWith(LB_HTTP_PATHS.lbPod)) return undefined;
    const podIp = path.slice(LB_HTTP_PATHS.lbPod.length);
    if (!applied)
      return { status: 503, body: JSON.stringify({ podIp, routed: false, ready: false, synced: false }) };
    const verdict = lbPodVerdict(o.nodeName, pods.list().map(lbPodState), routed, pools, podIp);
    const ok = verdict.routed && verdict.ready && forwarding === true;
    return { status: ok ? 200 : 503, body: JSON.stringify({ podIp, ...verdict, forwarding, synced: true }) };
  };
  const server = await startHttpServer(
    o.httpPort ?? o.config.ports.nodeAgent,
    { ready: () => applied && forwarding === true, drain: () => Promise.resolve() },
    registry,
    o.httpHost,
    lbPodAnswer,
  );
  const monitor = new CommandMonitor({
    command: [...ip, "monitor", "route", "netconf"],
    onStart: () => runner.trigger(),
    onLine: () => runner.trigger(),
    onError: (err) =>
      o.log.warn({ err }, "ip monitor stopped; checking the routes every 2 s until it is back"),
  });
  await informers.start();
  monitor.start();
  const resyncMs = o.resyncMs ?? DEFAULT_RESYNC_MS;
  const resync = setInterval(
    () => {
      const due = monitor.live ? resyncMs : Math.min(resyncMs, UNMONITORED_RESYNC_MS);
      if (performance.now() - lastRun >= due) runner.trigger();
    },
    Math.min(resyncMs, UNMONITORED_RESYNC_MS),
  );
  const dsrResync =
    dsrRunner &&
    setInterval(() => {
      dsrRunner.trigger();
      nodeFast?.check();
    }, o.dsr?.resyncMs ?? DEFAULT_DSR_RESYNC_MS);
  return {
    routes,
    registry,
    server,
    applied: () => applied,
    forwarding: () => forwarding === true,
    async stop() {
      clearInterval(resync);
      monitor.stop();
      clearInterval(dsrResync);
      runner.stop();
      dsrRunner?.stop();
      await nodeFast?.stop();
      await informers.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The DSR applier, driven by the data plane's desired state (the controller's own pure function, so
 * both agree on the backends), in a runner of its own: a pod that cannot be prepared never holds
 * back the node's routes.
 */
function startDsr(
  o: NodeAgentOptions,
  dsr: NodeAgentDsr,
  informers: ResilientInformers,
  registry: Registry,
): { runner: CoalescingRunner; applier: DsrApplier; handoverPeers: () => string[] } {
  const lb = lbPeers(o.config, o.namespace);
  const cluster = serviceInformers(informers, o.kubeconfig, lb);
  // Whose relayed flows this node's LB pod takes (controller/handover.ts): the node routes them.
  const handoverPeers = () =>
    informers.synced() ? acceptedPeers(cluster.services.list().filter((svc) => isOurs(svc, o.config))) : [];
  // Backends DSR cannot reach on the host network are told on their Services.
  const events = new EventSink(o.kubeconfig.makeApiClient(CoreV1Api), o.log, "portable-lb-node-agent");
  // LBs tunnel in IPIP where the IPVS engine is forced (DSR in auto runs on nftables: VXLAN).
  const ipip = lb.tunnel === "ipip";
  const applier = new DsrApplier({
    commandPrefix: o.commandPrefix,
    netnsDir: dsr.netnsDir,
    procSysNet: dsr.procSysNet,
    ipip,
    ...(dsr.decapObject && { decapObject: dsr.decapObject }),
    log: o.log,
    registry,
  });
  const coordination = o.kubeconfig.makeApiClient(CoordinationV1Api);
  const runner = new CoalescingRunner(
    async () => {
      // The LB pods and the other agents learn first whether this kernel has ipip: without it, their
      // ports with backends here are served by SNAT (desiredState), not sent into a tunnel it drops.
      // The Lease is written whenever the watched one says otherwise (or before the watch synced).
      let decap: boolean | undefined;
      if (ipip)
        try {
          decap = await applier.ipipDecap();
          const said = informers.synced() ? saidOf(cluster.ipipDecapLeases!.list(), o.nodeName) : undefined;
          if (said !== decap) await recordIpipDecap(coordination, o.namespace, o.nodeName, decap);
        } catch (err) {
          // The pods' DSR state is still kept below; the Lease is written on a later run.
          o.log.warn({ err }, "could not tell the LB pods whether this kernel has ipip; retrying");
        }
      if (!informers.synced()) return;
      const serviceObjects = [...cluster.services.list()];
      const withoutIpip = cluster.ipipDecapLeases && nodesWithoutIpip(cluster.ipipDecapLeases.list());
      // Of its own node the agent knows better than the Lease it may just have written.
      if (withoutIpip && decap !== undefined) withoutIpip[decap ? "delete" : "add"](o.nodeName);
      const input = {
        services: serviceObjects,
        slices: [...cluster.slices.list()],
        loadBalancerClass: o.config.loadBalancerClass,
        serveClassless: o.config.serveClassless,
        scheduler: o.config.dataPlane.scheduler,
        // The controller's own decision (same function, same inputs): which ports are DSR.
        forwarding: o.config.dataPlane.mode,
        networkPolicies: { policies: [...(cluster.networkPolicies?.list() ?? [])], lb },
        ...(withoutIpip && { nodesWithoutIpip: withoutIpip }),
      };
      // Pods not ready yet are prepared too, so none gets a flow before it can answer it.
      const services = withStartingBackends(
        desiredState(input).services,
        desiredState({ ...input, startingBackends: true }).services,
      );
      const report = await applier.apply(services, o.nodeName);
      await events.report(unreachableBackendEvents(report.hostNetwork, serviceObjects, o.config, o.nodeName));
    },
    { onError: (err) => o.log.error({ err }, "DSR state update failed; retrying") },
  );
  return { runner, applier, handoverPeers };
}
