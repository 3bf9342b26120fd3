// Applies direct server return on one node, by diff: each local backend pod's
// namespace (podDsrState.ts) and the node's own table and rp_filter (nodeDsrTable.ts,
// nodeRpFilter.ts). Every run reads back what is there; the first one also visits every pod
// namespace on the node, so a restarted agent adopts (and, where no longer wanted, removes) what
// an earlier run left. A pod that fails is logged and counted, and the others still get applied.
//
// Pod namespaces are entered with nsenter (setns: CAP_SYS_ADMIN), and sysctls are written through
// a writable mount of the node's /proc/sys/net (a container's own /proc/sys is read-only); net
// sysctls belong to the namespace of the process that opens them, so after nsenter the same path
// is the pod's.
//
// Where LBs may run the IPVS engine (its tunnel mode sends IPIP), each pod also gets an IPIP device.
// Whether the kernel has ipip is learnt from the first attempt (creating the device loads the module
// where there is one; ipipDecap() tries on the node itself): without it the pods keep VXLAN only, and
// the agent says so once (log and metric); the node agent tells the LB pods (common/ipipDecap.ts),
// which then serve ports with backends here by SNAT.
//
// With `decapObject`, each pod's uplink also gets the tc BPF decapsulation (podDecap.ts), which
// spares the VXLAN device's receive path; the device stays for whatever the program declines. Where
// the kernel will not load the object (learnt once, in a throwaway namespace) the agent says so once
// (log and metric) and the pods decapsulate on the device; a pod whose filter cannot be attached is
// logged and counted, and keeps the rest of its state.
import { existsSync } from "node:fs";
import type { Logger } from "pino";
import { Counter, Gauge, type Registry } from "prom-client";
import { DSR_BACKEND_IPIP_DEVICE, DSR_LB_DEVICE } from "../../dataplane/dsr/dsrTunnel.ts";
import { CommandError, run, withPrefix } from "../../dataplane/exec.ts";
import type { VirtualService } from "../../dataplane/model.ts";
import { dsrPlan } from "./dsrPlan.ts";
import { DSR_NODE_TABLE, desiredNodeTable, nodeTableChange, parseNodeTable } from "./nodeDsrTable.ts";
import { LOOSE, allInterfaces, routeDevice, rpFilters, strictInterfaces } from "./nodeRpFilter.ts";
import * as decap from "./podDecap.ts";
import { parsePodState, podAddresses, podSteps, type PodDsrState, type PodStep } from "./podDsrState.ts";
import { PodNetns } from "./podNetns.ts";

export interface DsrApplierOptions {
  /** Prefix of every command to reach the node's namespace: none on a node (hostNetwork). */
  commandPrefix?: string[];
  /** The container runtime's directory of pod network namespaces. */
  netnsDir: string;
  /** A writable mount of the node's /proc/sys/net. */
  procSysNet: string;
  /** LBs tunnel in IPIP (dataPlane.engine ipvs): pods get an IPIP device too. */
  ipip?: boolean;
  /** The backend pods' tc BPF decapsulation (dsr_decap.o): attached to each pod's uplink; without it, none. */
  decapObject?: string;
  log: Logger;
  registry: Registry;
}

export interface DsrFailure {
  podIp: string | undefined;
  netns: string | undefined;
  error: string;
}

export interface DsrReport {
  /** Backend pods prepared for DSR. */
  pods: number;
  vips: string[];
  /** Commands that changed something. */
  changes: number;
  failures: DsrFailure[];
  /** Host-network backends, not prepared. */
  hostNetwork: { ip: string; vips: string[] }[];
}

/** The device ipipDecap() makes on the node to learn whether the kernel has ipip, and deletes. */
export const IPIP_PROBE_DEVICE = "plb-ipip-probe";

function dsrMetrics(registry: Registry) {
  return {
    pods: new Gauge({
      name: "portable_lb_dsr_backend_pods",
      help: "Backend pods on this node prepared for direct server return",
      registers: [registry],
    }),
    vips: new Gauge({
      name: "portable_lb_dsr_vips",
      help: "DSR VIPs with a backend pod on this node",
      registers: [registry],
    }),
    changes: new Counter({
      name: "portable_lb_dsr_changes_total",
      help: "Changes made to pods' and the node's DSR state",
      registers: [registry],
    }),
    errors: new Counter({
      name: "portable_lb_dsr_pod_errors_total",
      help: "Backend pods whose DSR state could not be applied (see the log)",
      registers: [registry],
    }),
    ipip: new Gauge({
      name: "portable_lb_dsr_ipip",
      help: "1 while this node's DSR backend pods decapsulate IPIP (for IPVS-engine LBs); 0 where the kernel has no ipip or it is not wanted",
      registers: [registry],
    }),
    decap: new Gauge({
      name: "portable_lb_dsr_bpf_decap",
      help: "1 while this node's DSR backend pods decapsulate in tc BPF; 0 where not configured or the kernel refused the program (the VXLAN device decapsulates)",
      registers: [registry],
    }),
    decapErrors: new Counter({
      name: "portable_lb_dsr_bpf_decap_errors_total",
      help: "Backend pods whose tc BPF decapsulation could not be applied (the VXLAN device decapsulates; see the log)",
      registers: [registry],
    }),
    hostNetwork: new Gauge({
      name: "portable_lb_dsr_host_network_backends",
      help: "DSR backends on this node's own network (host-network pods): not served by DSR",
      registers: [registry],
    }),
  };
}

const sysctlPath = (root: string, dev: string) => `${root}/ipv4/conf/${dev}/rp_filter`;

/** `ip link add … type ipip` failed because the kernel has no ipip. */
const noIpipModule = (err: unknown): err is CommandError =>
  err instanceof CommandError && /Unknown device type/.test(err.stderr);

export class DsrApplier {
  private readonly o: DsrApplierOptions;
  private readonly prefix: string[];
  private readonly metrics: ReturnType<typeof dsrMetrics>;
  private readonly netns: PodNetns;
  /** Namespaces holding our state, with their pod's MTU (the node's MSS clamp follows the smallest). */
  private readonly owned = new Map<string, number | undefined>();
  private adopted = false;
  /** The kernel has ipip: unknown until a device was made or refused. */
  private ipipKernel: boolean | undefined;
  private hostNetworkSeen = "";
  /** The object's program tag: unknown until loaded once, false where the kernel refused it. */
  private decapTag: string | false | undefined;
  /** Per namespace, the devices whose clsact qdisc this agent added. */
  private readonly clsactOurs = new Map<string, Set<string>>();
  /** Per namespace, the last BPF decapsulation error logged (each is logged once). */
  private readonly decapErrorSeen = new Map<string, string>();

  constructor(o: DsrApplierOptions) {
    this.o = o;
    this.prefix = o.commandPrefix ?? [];
    this.metrics = dsrMetrics(o.registry);
    this.netns = new PodNetns(o.netnsDir, (path, args) => this.ipIn(path, args));
    this.metrics.ipip.set(0);
    this.metrics.decap.set(0);
  }

  /** Whether pods get the IPIP device now. */
  private ipip(): boolean {
    return (this.o.ipip ?? false) && this.ipipKernel !== false;
  }

  private node(tool: string, args: string[], input?: string): Promise<string> {
    return run([...withPrefix(this.prefix, tool), ...args], input);
  }

  private inPod(path: string, tool: string, args: string[], input?: string): Promise<string> {
    return run([...withPrefix(this.prefix, "nsenter"), `--net=${path}`, "--", tool, ...args], input);
  }

  /** The node-side ifindex of the veth of the local pod with this IP (lbNodeFastPath.ts). */
  peerIfindex(podIp: string): Promise<number | undefined> {
    return this.netns.peerIfindex(podIp);
  }

  private ipIn(path: string, args: string[]): Promise<string> {
    return this.inPod(path, "ip", args);
  }

  /** Makes this node's DSR state follow `services`; never throws for one pod's failure. */
  async apply(services: VirtualService[], nodeName: string): Promise<DsrReport> {
    const nodeAddresses = podAddresses(await this.node("ip", ["-j", "-4", "addr", "show"])).map((a) => a.ip);
    const plan = dsrPlan(services, nodeName, nodeAddresses);
    this.reportHostNetwork(plan.hostNetwork);
    if (this.o.decapObject && this.decapTag === undefined) await this.learnDecapTag(this.o.decapObject);
    if (!this.adopted) {
      for (const path of await this.netns.all()) {
        const s = await this.readPod(path, "").then(
          (r) => r.state,
          () => undefined,
        );
        if (s && (s.device || s.ipip || s.vips.length > 0)) this.owned.set(path, undefined);
      }
      this.adopted = true;
    }
    const failures: DsrFailure[] = [];
    const targets = new Map<string, { ip: string | undefined; vips: string[] }>();
    for (const [ip, vips] of plan.pods) {
      const path = await this.netns.find(ip);
      if (path) targets.set(path, { ip, vips });
      else
        failures.push({
          podIp: ip,
          netns: undefined,
          error: `no network namespace under ${this.o.netnsDir} holds the pod's address`,
        });
    }
    for (const path of this.owned.keys())
      if (!targets.has(path)) targets.set(path, { ip: undefined, vips: [] });
    let changes = 0;
    for (const [path, { ip, vips }] of targets) {
      try {
        const pod = await this.applyPod(path, ip, vips);
        const steps = [...pod.steps, ...(await this.applyDecap(path, pod.addr, ip, vips))];
        changes += steps.length;
        if (vips.length > 0) this.owned.set(path, pod.state.podMtu);
        else this.owned.delete(path);
        if (steps.length > 0)
          this.o.log.info({ podIp: ip, netns: path, vips, steps }, "pod DSR state updated");
      } catch (err) {
        // A namespace that is gone takes its state along.
        if (!ip && !existsSync(path)) {
          this.owned.delete(path);
          this.clsactOurs.delete(path);
          this.decapErrorSeen.delete(path);
          continue;
        }
        const error = err instanceof Error ? err.message : String(err);
        failures.push({ podIp: ip, netns: path, error });
      }
    }
    for (const f of failures) {
      this.metrics.errors.inc();
      this.o.log.error(f, "pod DSR state not applied; the other pods go on");
    }
    const prepared = [...targets].filter(([path, t]) => t.vips.length > 0 && this.owned.has(path));
    changes += await this.applyNode(
      plan.dsrVips,
      prepared.map(([, t]) => t.ip!),
      prepared.flatMap(([path]) => this.owned.get(path) ?? []),
    );
    this.metrics.changes.inc(changes);
    this.metrics.pods.set(prepared.length);
    this.metrics.vips.set(plan.vips.length);
    return { pods: prepared.length, vips: plan.vips, changes, failures, hostNetwork: plan.hostNetwork };
  }

  /**
   * Whether this node's kernel decapsulates IPIP, once known: from a pod's device, or from a device
   * made on the node and deleted at once (making one loads ipip where the kernel has it as a module).
   */
  async ipipDecap(): Promise<boolean> {
    if (this.ipipKernel !== undefined) return this.ipipKernel;
    try {
      await this.node("ip", ["link", "add", "name", IPIP_PROBE_DEVICE, "type", "ipip"]);
    } catch (err) {
      if (noIpipModule(err)) return this.lacksIpip(err);
      // A probe device left by an agent stopped in between: made, so the kernel has ipip.
      if (!(err instanceof CommandError && /File exists/.test(err.stderr))) throw err;
    }
    await this.node("ip", ["link", "del", IPIP_PROBE_DEVICE]);
    this.ipipKernel = true;
    return true;
  }

  private lacksIpip(err: CommandError): false {
    this.ipipKernel = false;
    this.metrics.ipip.set(0);
    this.o.log.error(
      { err: err.message },
      "the kernel has no ipip: DSR backends on this node decapsulate VXLAN only, so LBs on the IPVS engine (tunnel mode, IPIP) serve their ports by SNAT; load the ipip module on this node and restart this agent, or set dataPlane.engine to nftables",
    );
    return false;
  }

  /** Reads one pod's state and applies its steps; without ipip once the kernel turns out to lack it. */
  private async applyPod(
    path: string,
    ip: string | undefined,
    vips: string[],
  ): Promise<{ state: PodDsrState; steps: PodStep[]; addr: string }> {
    const { state, addr } = await this.readPod(path, ip ?? "");
    if (ip && state.podMtu === undefined) this.netns.forget(path); // the address moved on
    const ipip = this.ipip();
    const steps = podSteps(state, vips, ipip);
    for (const step of steps)
      try {
        await this.podStep(path, step);
      } catch (err) {
        const ipipAdd = "ip" in step && step.ip.join(" ").startsWith(`link add ${DSR_BACKEND_IPIP_DEVICE} `);
        if (!ipipAdd || !noIpipModule(err)) throw err;
        this.lacksIpip(err);
        return this.applyPod(path, ip, vips);
      }
    if (ipip && vips.length > 0) {
      this.ipipKernel = true;
      this.metrics.ipip.set(1);
    }
    return { state, steps, addr };
  }

  private async readPod(path: string, podIp: string): Promise<{ state: PodDsrState; addr: string }> {
    const [addr, netconf] = [
      await this.ipIn(path, ["-j", "-d", "addr", "show"]),
      await this.ipIn(path, ["-4", "-j", "netconf", "show"]),
    ];
    return { state: parsePodState(addr, netconf, podIp), addr };
  }

  /** Loads the object once, on `lo` of a namespace that dies with the command, to learn its tag. */
  private async learnDecapTag(object: string): Promise<void> {
    try {
      const probe = decap.objectTagProbe(object);
      this.decapTag = decap.parseObjectTag(
        await this.node("unshare", ["--net", "--", "tc", "-j", "-batch", "-"], probe),
      );
      this.metrics.decap.set(1);
    } catch (err) {
      this.decapTag = false;
      this.metrics.decapErrors.inc();
      this.o.log.error(
        { err: err instanceof Error ? err.message : String(err), object },
        "the kernel did not load the DSR decapsulation program: backend pods on this node decapsulate on their VXLAN device (slower); restart this agent once fixed",
      );
    }
  }

  /**
   * The pod's BPF decapsulation, by diff: our filter on its uplink while it serves `vips`, else on
   * no device. Never throws: the VXLAN device decapsulates without it. Where the object is not
   * loadable, a backend's filter is left as it is.
   */
  private async applyDecap(
    path: string,
    addr: string,
    ip: string | undefined,
    vips: string[],
  ): Promise<decap.TcStep[]> {
    const object = this.o.decapObject;
    const { uplink, all } = decap.podUplinks(addr, ip ?? "");
    const tag = this.decapTag || undefined;
    if (!object || all.length === 0 || (vips.length > 0 && (!uplink || !tag))) return [];
    const done: decap.TcStep[] = [];
    const ours = this.clsactOurs.get(path) ?? new Set<string>();
    try {
      const listing = await this.inPod(path, "tc", ["-j", "-batch", "-"], decap.readBatch(all));
      const wanted = vips.length > 0 ? { device: uplink!, object, tag: tag! } : undefined;
      for (const step of decap.decapSteps(decap.parseDevices(all, listing, ours), wanted)) {
        await this.inPod(path, "tc", step.tc);
        const [kind, op, , dev] = step.tc;
        if (kind === "qdisc" && op === "add") ours.add(dev!);
        if (kind === "qdisc" && op === "del") ours.delete(dev!);
        done.push(step);
      }
      this.decapErrorSeen.delete(path);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.metrics.decapErrors.inc();
      if (this.decapErrorSeen.get(path) !== error)
        this.o.log.warn(
          { podIp: ip, netns: path, error },
          "pod's BPF decapsulation not applied; its VXLAN device decapsulates",
        );
      this.decapErrorSeen.set(path, error);
    }
    if (ours.size > 0) this.clsactOurs.set(path, ours);
    else this.clsactOurs.delete(path);
    return done;
  }

  /**
   * The LB pod taking a handover's relayed flows (controller/handover.ts): their client addresses
   * arrive on its tunnel device, which has no address, and the kernel's reverse-path filter drops
   * whatever arrives on an address-less device unless the filter is off there, in loose mode too.
   * The effective value is max(all, device): so `all` and the device go to 0, and the uplink first
   * takes the value `all` had where it was lower, so that its own filtering stays as it was.
   * True when it changed anything.
   */
  async openRelayTarget(podIp: string): Promise<boolean> {
    const path = await this.netns.find(podIp);
    if (!path) return false;
    const filters = rpFilters(await this.inPod(path, "ip", ["-4", "-j", "netconf", "show"]));
    const value = (name: string) => filters.get(name) ?? 0;
    if (!filters.has(DSR_LB_DEVICE)) return false;
    const all = value("all");
    if (all === 0 && value(DSR_LB_DEVICE) === 0) return false;
    const uplink = routeDevice(await this.inPod(path, "ip", ["-j", "route", "show", "default"]));
    const write = (name: string, v: number) =>
      this.inPod(path, "tee", [sysctlPath(this.o.procSysNet, name)], `${v}\n`);
    if (uplink && value(uplink) < all) await write(uplink, all);
    if (all !== 0) await write("all", 0);
    if (value(DSR_LB_DEVICE) !== 0) await write(DSR_LB_DEVICE, 0);
    this.o.log.warn(
      { podIp, uplink, allWas: all },
      "rp_filter off on the LB pod's tunnel device (and all): it takes relayed flows",
    );
    return true;
  }

  private async podStep(path: string, step: PodStep): Promise<void> {
    if ("ip" in step) await this.ipIn(path, step.ip);
    else await this.inPod(path, "tee", [sysctlPath(this.o.procSysNet, step.rpFilter)], `${step.value}\n`);
  }

  /** The node's table (for every DSR VIP) and rp_filter; returns how many changes were made. */
  private async applyNode(dsrVips: string[], podIps: string[], mtus: number[]): Promise<number> {
    let changes = 0;
    const netconf = podIps.length > 0 ? await this.node("ip", ["-4", "-j", "netconf", "show"]) : "[]";
    // The pods' interfaces are looked up only when some interface is strict (not on every resync).
    if (strictInterfaces(netconf, allInterfaces(netconf)).length > 0) {
      const devices: string[] = [];
      for (const ip of podIps) {
        const dev = routeDevice(await this.node("ip", ["-j", "route", "get", ip]));
        if (dev) devices.push(dev);
      }
      const strict = strictInterfaces(netconf, devices);
      for (const dev of strict) {
        await this.node("tee", [sysctlPath(this.o.procSysNet, dev)], `${LOOSE}\n`);
        this.o.log.warn({ interface: dev }, "rp_filter strict -> loose: DSR replies leave pods from the VIP");
      }
      changes += strict.length;
    }
    let current;
    try {
      current = parseNodeTable(await this.node("nft", ["-j", "list", "table", "ip", DSR_NODE_TABLE]));
    } catch (err) {
      if (!(err instanceof CommandError && /No such file or directory/.test(err.stderr))) throw err;
    }
    const desired = desiredNodeTable(dsrVips, mtus);
    const script = nodeTableChange(current, desired);
    if (script) {
      await this.node("nft", ["-f", "-"], script);
      this.o.log.info({ table: desired ?? null }, "node DSR table updated");
      changes += 1;
    }
    return changes;
  }

  private reportHostNetwork(backends: DsrReport["hostNetwork"]): void {
    this.metrics.hostNetwork.set(backends.length);
    const key = JSON.stringify(backends);
    if (key !== this.hostNetworkSeen && backends.length > 0)
      this.o.log.warn(
        { backends },
        "DSR backends on the host network are not served by DSR (a VIP on the node's own lo would capture it for every pod); run them in the pod network, or use forwarding snat",
      );
    this.hostNetworkSeen = key;
  }
}
