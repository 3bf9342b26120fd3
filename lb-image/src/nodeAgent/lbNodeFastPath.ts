// The LB node's share of the DSR fast path (lb-image/fastpath/bpf/dsr_node.c): packets for the VIPs
// go from the node's uplink straight into the LB pod its VIP routes lead to, and the pod's tunnel
// packets straight back out, past the node's IP stack, netfilter and pod bridge. The agent runs the
// loader (`portable-lb-fastpath node`) and tells it the uplink (the default route's device) and the
// LB pods its routes lead to, each by its veth's node side. Only an accelerator: the node's routes
// stay the truth (the programs follow them), and while the loader is down, or for a pod it could not
// attach to, the node forwards as before.
import type { Logger } from "pino";
import { Gauge, type Registry } from "prom-client";
import { CoalescingRunner } from "../common/coalescingRunner.ts";
import { LoaderSupervisor } from "../dataplane/fastpath/loaderSupervisor.ts";
import type { NodeFastPath, NodeFastPathPod } from "../dataplane/fastpath/nodeFastPath.ts";
import { packetCounter } from "../dataplane/fastpath/packetCounter.ts";

export interface LbNodeFastPathOptions {
  /** Starts the loader (NodeFastPath.start); rejects with its reason. */
  start: () => Promise<NodeFastPath>;
  /** The node-side ifindex of a local pod's veth, by the pod's IP (undefined: not found). */
  peerIfindex: (podIp: string) => Promise<number | undefined>;
  /** The node's uplink, where VIP traffic arrives: its default route's device. */
  uplink: () => Promise<string>;
  /** The VIP pools (CIDRs): the node's VIP routes' prefixes. */
  pools: string[];
  log: Logger;
  registry: Registry;
  retryMs?: { first: number; max: number };
}

export class LbNodeFastPath {
  readonly #o: LbNodeFastPathOptions;
  /** Started with the first LB pod: a node without one has nothing for the programs to do. */
  #loader: LoaderSupervisor<NodeFastPath> | undefined;
  readonly #runner: CoalescingRunner;
  readonly #up: Gauge;
  readonly #skipped: Gauge;
  /** The LB pods the node's VIP routes lead to, sorted. */
  #pods: string[] = [];
  /** What the loader last took (uplink and pods), so that a run with nothing new only checks. */
  #synced = "";
  #syncedBy: NodeFastPath | undefined;
  /** What the last run left out, to log only news. */
  #lastSkipped = "";

  constructor(o: LbNodeFastPathOptions) {
    this.#o = o;
    this.#up = new Gauge({
      name: "portable_lb_node_fast_path_up",
      help: "1 while the node's fast path carries VIP traffic between its uplink and its LB pods (0: the node's IP stack does)",
      registers: [o.registry],
    });
    this.#skipped = new Gauge({
      name: "portable_lb_node_fast_path_skipped_pods",
      help: "LB pods the node's fast path could not find or attach to (their traffic takes the node's IP stack)",
      registers: [o.registry],
    });
    packetCounter({
      name: "portable_lb_node_fast_path_packets_total",
      help: "Packets the node's fast path redirected (to_pod, from_pod), and those it left to the node's IP stack, by reason",
      registry: o.registry,
      read: () => this.#loader?.current?.stats().catch(() => undefined) ?? Promise.resolve(undefined),
    });
    this.#runner = new CoalescingRunner(() => this.#run(), {
      onError: (err) => o.log.error({ err }, "node fast path: could not update it; retrying"),
    });
  }

  /** The LB pods the node's VIP routes now lead to. */
  update(podIps: string[]): void {
    const pods = [...new Set(podIps)].sort();
    if (pods.join() === this.#pods.join()) return;
    this.#pods = pods;
    if (this.#loader) this.#runner.trigger();
    else if (pods.length > 0) this.#loader = this.#startLoader();
  }

  #startLoader(): LoaderSupervisor<NodeFastPath> {
    const o = this.#o;
    return new LoaderSupervisor({
      start: o.start,
      started: () => {
        this.#runner.trigger();
        return Promise.resolve();
      },
      what: "the LB node's fast path",
      fallback: "the node's IP stack carries the traffic between its uplink and its LB pods",
      log: o.log,
      up: this.#up,
      onProblem: () => undefined, // logged and counted (the up gauge): a node has no pod of ours to tell
      ...(o.retryMs && { retryMs: o.retryMs }),
    });
  }

  /**
   * Looks again (a pod's veth may have changed), then syncs what changed or, with nothing new, has
   * the loader read its programs back and repair them: the agent's periodic DSR check.
   */
  check(): void {
    this.#runner.trigger();
  }

  async stop(): Promise<void> {
    this.#runner.stop();
    await this.#loader?.stop();
  }

  async #run(): Promise<void> {
    const loader = this.#loader?.current;
    if (!loader) return;
    // No LB pod (all gone): nothing on the uplink either, so its traffic costs nothing more.
    const uplinks = this.#pods.length > 0 ? [await this.#o.uplink()] : [];
    const pods: NodeFastPathPod[] = [];
    const missing: string[] = [];
    for (const ip of this.#pods) {
      const ifindex = await this.#o.peerIfindex(ip);
      if (ifindex === undefined) missing.push(`pod ${ip}: no local pod namespace holds it on a veth`);
      else pods.push({ ip, ifindex });
    }
    const wanted = JSON.stringify({ uplinks, pods });
    let skipped: string[];
    try {
      if (wanted !== this.#synced || loader !== this.#syncedBy) {
        const synced = await loader.sync(uplinks, this.#o.pools, pods);
        skipped = synced.skipped;
        this.#synced = wanted;
        this.#syncedBy = loader;
        if (synced.changes > 0) this.#o.log.info({ uplinks, pods }, "node fast path synced");
      } else {
        const checked = await loader.check();
        skipped = checked.skipped;
        if (checked.drift.length > 0)
          this.#o.log.warn(
            { drift: checked.drift },
            "node fast path: found its programs or maps changed; repaired them",
          );
      }
    } catch (err) {
      this.#loader?.lost(loader, `could not take the node's uplink and LB pods: ${String(err)}`);
      return;
    }
    this.#up.set(1);
    const left = [...missing, ...skipped];
    this.#skipped.set(left.length);
    if (left.join() !== this.#lastSkipped && left.length > 0)
      this.#o.log.warn({ left }, "node fast path: these LB pods' traffic takes the node's IP stack");
    this.#lastSkipped = left.join();
  }
}
