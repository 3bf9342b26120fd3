// The LB pod's fast path (lb-image/fastpath/README.md): the loader attaches dsr_lb.o to the pod's
// uplink and keeps its services and backends as the controller syncs them.
import { z } from "zod";
import { LoaderProcess, syncSchema, type LoaderOptions } from "./loaderProcess.ts";

export interface FastPathService {
  vip: string;
  port: number;
  protocol: "tcp" | "udp";
  /** The Maglev table: slot i's backend pod IP, as the nftables rule maps slot i. */
  table: string[];
}

export interface FastPathStats {
  forwarded: number;
  /** Packets left to the kernel path, by reason. */
  passed: Record<string, number>;
  /** Flows that took the Maglev table, by serviceKey. */
  flows: Record<string, number>;
}

const statsSchema = z.object({
  ok: z.literal(true),
  forwarded: z.number(),
  passed: z.record(z.string(), z.number()),
  flows: z.record(z.string(), z.number()),
});

export class FastPath extends LoaderProcess {
  /** Starts the loader; resolves once its program is attached to `device`, rejects with its error. */
  static start(o: LoaderOptions & { device: string }): Promise<FastPath> {
    return LoaderProcess.launch((child, timeoutMs) => new FastPath(child, timeoutMs), {
      ...o,
      args: ["--device", o.device],
    });
  }

  /** Makes the program's services and backends exactly these; `changes` counts map writes and deletes. */
  async sync(services: FastPathService[], backends: string[]): Promise<{ changes: number }> {
    const r = await this.request({ op: "sync", services, backends }, syncSchema);
    return { changes: r.changes };
  }

  async stats(): Promise<FastPathStats> {
    const r = await this.request({ op: "stats" }, statsSchema);
    return { forwarded: r.forwarded, passed: r.passed, flows: r.flows };
  }
}
