// A fast path's packet counts as a Prometheus counter: the loader keeps them (per-CPU, in a map),
// so each scrape reads them afresh; while no loader runs, the counter keeps its last values.
import { Counter, type Registry } from "prom-client";

export function packetCounter(o: {
  name: string;
  help: string;
  registry: Registry;
  /** The counts by `result` label; undefined while there is no loader to ask. */
  read: () => Promise<Record<string, number> | undefined>;
}): Counter {
  const read = o.read;
  return new Counter({
    name: o.name,
    help: o.help,
    labelNames: ["result"],
    registers: [o.registry],
    async collect() {
      const now = await read();
      if (!now) return;
      this.reset();
      for (const [result, n] of Object.entries(now)) this.inc({ result }, n);
    },
  });
}
