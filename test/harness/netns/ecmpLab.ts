// The ECMP paper's topology (its Fig. 5) in network namespaces, for the BGP tests and benchmarks:
//
//   client ── router (FRR: bgpd, zebra, bfdd; ECMP) ── node network 192.168.100.0/24
//                                                       ├── node1 (10.244.1.0/24 pod bridge)
//                                                       ├── node2 …
//                                                       └── nodeN
//
// Nodes route each other's pod subnets (flannel host-gw does this in a cluster) and forward. Route
// reflectors run on some nodes with the host's network, as the pod the RouteReflector component
// renders (DeployedPod: its user, capabilities, read-only root and volumes): the router peers with
// their node address, LB speakers with their pod-bridge (overlay) address. LB pods and backends are namespaces on a node's pod bridge (`pod`); `nodeRoute` is what
// the node agent does for the LB pod on that node.
import {
  renderRouteReflectorBird,
  renderUpstreamRouterFrr,
  type BfdTimers,
  type BgpTimers,
} from "@portable-lb/core/bgp";
import { join } from "node:path";
import { RR_PATHS, routeReflectorPodSpec } from "../../../packages/core/src/routeReflector/podSpec.ts";
import { type Bridge, FrrRouter, type LabNamespace, NetnsLab } from "@portable-lb/lab";
import type { VirtualService } from "../../../lb-image/src/dataplane/model.ts";
import { parseFrrBfdPeers, upPeers } from "../bfdSessions.ts";
import { DeployedPod } from "./deployedPod.ts";
import { DsrBackendNode } from "./dsrBackendNode.ts";
import type { LbPod } from "./lbPod.ts";
import type { WatchedProcess } from "./watchedProcess.ts";

export const ROUTER_IP = "192.168.100.1";
export const CLIENT_IP = "10.10.0.2";
export const POD_CIDR = "10.244.0.0/16";

export interface EcmpLabOptions {
  name: string;
  nodes: number;
  /** 1-based numbers of the nodes that run a route reflector. */
  reflectorNodes: number[];
  asn: number;
  /** The VIP pools: what the reflectors accept from speakers. */
  vipPools: string[];
  bfd: BfdTimers;
  timers: BgpTimers;
  gracefulRestartS: number;
  /** BGP (TCP MD5) password on every session, when set. */
  password?: string;
}

export interface LabNode {
  n: number;
  ns: LabNamespace;
  /** Address on the node network: the BGP next hop for its LB pods. */
  ip: string;
  /** The node's address on its pod bridge: the overlay address reflectors listen on for speakers. */
  podGateway: string;
  podBridge: Bridge;
  /** The node's interface on the node network (link down = the node is cut off). */
  uplink: string;
}

export const nodeIp = (n: number) => `192.168.100.${10 + n}`;
export const nodeName = (n: number) => `node${n}`;
export const podIp = (node: number, host: number) => `10.244.${node}.${host}`;

export class EcmpLab {
  readonly lab: NetnsLab;
  readonly o: EcmpLabOptions;
  readonly nodes: LabNode[];
  readonly client: LabNamespace;
  readonly routerNs: LabNamespace;
  router!: FrrRouter;
  readonly reflectors = new Map<number, { pod: DeployedPod; bird: WatchedProcess }>();
  readonly #dsrNodes: DsrBackendNode[] = [];

  private constructor(
    lab: NetnsLab,
    o: EcmpLabOptions,
    nodes: LabNode[],
    client: LabNamespace,
    router: LabNamespace,
  ) {
    this.lab = lab;
    this.o = o;
    this.nodes = nodes;
    this.client = client;
    this.routerNs = router;
  }

  static async create(o: EcmpLabOptions): Promise<EcmpLab> {
    const lab = await NetnsLab.create(o.name);
    try {
      const router = await lab.namespace("router", { forwarding: true });
      // Hash on ports too (L4), so flows from one client spread over the LB nodes.
      await router.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
      const client = await lab.namespace("client");
      await lab.link(client, router, { a: `${CLIENT_IP}/24`, b: "10.10.0.1/24" });
      await client.defaultRoute("10.10.0.1");
      const nodeNet = await lab.bridge(router, "nodes", `${ROUTER_IP}/24`);
      const nodes: LabNode[] = [];
      for (let n = 1; n <= o.nodes; n++) {
        const ns = await lab.namespace(`node${n}`, { forwarding: true });
        const up = await lab.attach(nodeNet, ns, `${nodeIp(n)}/24`, "eth0");
        await ns.defaultRoute(ROUTER_IP);
        const podGateway = podIp(n, 1);
        const podBridge = await lab.bridge(ns, "cni0", `${podGateway}/24`);
        nodes.push({ n, ns, ip: nodeIp(n), podGateway, podBridge, uplink: up.name });
      }
      // host-gw: every node reaches every other node's pod subnet through that node.
      for (const a of nodes) for (const b of nodes) if (a !== b) await a.ns.route(`10.244.${b.n}.0/24`, b.ip);
      const ecmp = new EcmpLab(lab, o, nodes, client, router);
      for (const n of o.reflectorNodes) await ecmp.startReflector(n);
      ecmp.router = await FrrRouter.start(router, ecmp.routerConfig());
      return ecmp;
    } catch (err) {
      await lab.destroy();
      throw err;
    }
  }

  node(n: number): LabNode {
    const node = this.nodes[n - 1];
    if (!node) throw new Error(`ecmp lab: no node ${n}`);
    return node;
  }

  routerConfig(): string {
    return renderUpstreamRouterFrr({
      asn: this.o.asn,
      routerId: ROUTER_IP,
      routeReflectors: this.o.reflectorNodes.map(nodeIp),
      maximumPaths: 16,
      bfd: this.o.bfd,
      timers: this.o.timers,
      ...(this.o.password !== undefined && { password: this.o.password }),
    });
  }

  /** Every path the router holds for `prefix` (FRR's BGP table, add-path) as "LB node via reflector". */
  async routerPaths(prefix: string): Promise<string[]> {
    const out = await this.router.vtysh(`show bgp ipv4 unicast ${prefix} json`);
    const paths =
      (JSON.parse(out || "{}") as { paths?: { peer?: { peerId?: string }; nexthops?: { ip?: string }[] }[] })
        .paths ?? [];
    return paths.map((p) => `${p.nexthops?.[0]?.ip} via ${p.peer?.peerId}`).sort();
  }

  /** The reflectors (node addresses) the router has BFD Up with. */
  async routerBfdUp(): Promise<string[]> {
    return upPeers(parseFrrBfdPeers(await this.router.vtysh("show bfd peers json")));
  }

  /**
   * Whether the router's paths to `vip` through LB pod `lb` on node `n` are all protected by BFD:
   * the pod's sessions are (LbPod.bfdProtected), the router has BFD Up with every reflector, and it
   * holds the node's path from each of them.
   */
  async pathsProtected(n: number, lb: LbPod, vip: string): Promise<boolean> {
    const reflectors = this.o.reflectorNodes.map(nodeIp);
    const [pod, bfd, paths] = await Promise.all([
      lb.bfdProtected(),
      this.routerBfdUp(),
      this.routerPaths(`${vip}/32`),
    ]);
    return (
      pod &&
      bfd.join() === [...reflectors].sort().join() &&
      reflectors.every((rr) => paths.includes(`${nodeIp(n)} via ${rr}`))
    );
  }

  /** The reflectors' speaker-facing addresses: what the LB config lists as bgp.routeReflectors. */
  reflectorAddresses(): string[] {
    return this.o.reflectorNodes.map((n) => this.node(n).podGateway);
  }

  /** The control socket of the reflector on node `n`, on this machine. */
  reflectorSocket(n: number): string {
    const rr = this.reflectors.get(n);
    if (!rr) throw new Error(`ecmp lab: no reflector on node ${n}`);
    return join(rr.pod.volumePath("run"), "bird.ctl");
  }

  /** birdc on the reflector of node `n`; "" while its BIRD does not answer. */
  async reflectorBirdc(n: number, ...args: string[]): Promise<string> {
    const r = await this.node(n).ns.exec("birdc", ["-s", this.reflectorSocket(n), ...args]);
    return r.code === 0 ? r.stdout : "";
  }

  /**
   * Starts (or restarts) the route reflector on node `n`: the pod the RouteReflector component
   * renders, its Secret holding the config portable-lb renders for it.
   */
  async startReflector(n: number): Promise<WatchedProcess> {
    const node = this.node(n);
    let pod = this.reflectors.get(n)?.pod;
    if (!pod) {
      const secret = `portable-lb-rr-${n}`;
      const config = renderRouteReflectorBird({
        routerId: node.ip,
        asn: this.o.asn,
        speakerRanges: [POD_CIDR],
        speakerLocalAddress: node.podGateway,
        vipPrefixes: this.o.vipPools,
        upstreamRouters: [ROUTER_IP],
        bfd: this.o.bfd,
        timers: this.o.timers,
        gracefulRestartS: this.o.gracefulRestartS,
        ...(this.o.password !== undefined && { password: this.o.password }),
      });
      pod = await DeployedPod.create({
        name: `rr${n}`,
        namespace: "portable-lb-system",
        spec: routeReflectorPodSpec({
          configSecret: secret,
          node: nodeName(n),
          image: "portable-lb",
          priorityClassName: "portable-lb-dataplane",
        }),
        ns: node.ns,
        nodeName: nodeName(n),
        dir: join(this.lab.dir, `rr${n}`),
        runtime: { hostIP: node.ip },
        secrets: { [secret]: { [RR_PATHS.configFile]: config } },
      });
    }
    const bird = pod.start("bird");
    this.reflectors.set(n, { pod, bird });
    return bird;
  }

  /** Stops the reflector on node `n` as a pod deletion does (SIGTERM: BIRD's clean shutdown). */
  async stopReflector(n: number): Promise<void> {
    const bird = this.reflectors.get(n)?.bird;
    if (bird && (await bird.signal("SIGTERM", 10_000)) === undefined) await bird.kill();
  }

  /** A pod namespace on node `n`'s pod bridge at 10.244.n.host, its default route via the node. */
  async pod(
    n: number,
    name: string,
    host: number,
    opts: { forwarding?: boolean } = {},
  ): Promise<LabNamespace> {
    const node = this.node(n);
    const ns = await this.lab.namespace(name, opts);
    await this.lab.attach(node.podBridge, ns, `${podIp(n, host)}/24`, "eth0");
    await ns.defaultRoute(node.podGateway);
    return ns;
  }

  /**
   * The backend side of DSR for backend pod `pod` (at `ip`) on node `n`, as the node agent prepares
   * it (decap device, each of `vips` on the pod's lo, the node's notrack and MSS clamp), on a node
   * strict about reverse paths that drops conntrack-INVALID packets in FORWARD (as kube-proxy does).
   * Undone by `destroy`.
   */
  async dsrBackend(n: number, pod: LabNamespace, ip: string, vips: string[], port: number): Promise<void> {
    const node = await DsrBackendNode.create(this.node(n).ns, [pod], ["cni0"]);
    this.#dsrNodes.push(node);
    const services = vips.map((vip): VirtualService => ({
      ...{ vip, port, protocol: "tcp", scheduler: "mh", forwarding: "dsr" },
      backends: [{ ip, port, weight: 1, nodeName: nodeName(n) }],
    }));
    const report = await node.applier().apply(services, nodeName(n));
    if (report.failures.length > 0 || report.pods !== 1)
      throw new Error(`${pod.name}: DSR not prepared: ${JSON.stringify(report.failures)}`);
  }

  /** Cuts node `n` off the node network (its uplink down: the kernel drops its routes through it). */
  async uplinkDown(n: number): Promise<void> {
    const node = this.node(n);
    await node.ns.ip("link", "set", node.uplink, "down");
  }

  /** Brings node `n`'s uplink back with the routes the kernel dropped with it. */
  async uplinkUp(n: number): Promise<void> {
    const node = this.node(n);
    await node.ns.ip("link", "set", node.uplink, "up");
    await node.ns.defaultRoute(ROUTER_IP);
    for (const other of this.nodes)
      if (other !== node) await node.ns.route(`10.244.${other.n}.0/24`, other.ip);
  }

  /** What the node agent does: the node hands traffic for `pool` to its LB pod. */
  async nodeRoute(n: number, pool: string, lbPodIp: string): Promise<void> {
    await this.node(n).ns.route(pool, lbPodIp);
  }

  async destroy(): Promise<void> {
    // Their bind mounts would keep the pods' namespaces alive.
    for (const node of this.#dsrNodes.splice(0)) node.destroy();
    await this.router.stop().catch(() => undefined);
    for (const { pod } of this.reflectors.values()) await pod.kill();
    await this.lab.destroy();
  }
}
