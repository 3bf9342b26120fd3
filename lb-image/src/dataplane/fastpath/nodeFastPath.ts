// The LB node's share of the fast path (lb-image/fastpath/bpf/dsr_node.c), as the node agent runs
// it: `portable-lb-fastpath node` loads the programs, then attaches one to each uplink and one to each
// LB pod's host-side veth as syncs say.
import { z } from "zod";
import { LoaderProcess, syncSchema, type LoaderOptions } from "./loaderProcess.ts";

export interface NodeFastPathPod {
  /** The LB pod's IP: the next hop of the node's VIP routes. */
  ip: string;
  /** The ifindex of its veth's host side, in the node's namespace. */
  ifindex: number;
}

const statsSchema = z.object({ ok: z.literal(true), counts: z.record(z.string(), z.number()) });

export class NodeFastPath extends LoaderProcess {
  static start(o: LoaderOptions): Promise<NodeFastPath> {
    return LoaderProcess.launch((child, timeoutMs) => new NodeFastPath(child, timeoutMs), {
      ...o,
      args: ["node"],
    });
  }

  /**
   * Attaches to exactly these uplinks (by name) and LB pods' veths, for packets to these VIP pools
   * (CIDRs); `changes` counts what it did, `skipped` names the pods whose veth it could not attach
   * to (their traffic takes the node's IP stack).
   */
  async sync(
    uplinks: string[],
    pools: string[],
    pods: NodeFastPathPod[],
  ): Promise<{ changes: number; skipped: string[] }> {
    const r = await this.request({ op: "sync", uplinks, pools, pods }, syncSchema);
    return { changes: r.changes, skipped: r.skipped };
  }

  /** Packets by what the programs did with them (to_pod, from_pod, or why they left one to the kernel). */
  async stats(): Promise<Record<string, number>> {
    return (await this.request({ op: "stats" }, statsSchema)).counts;
  }
}
