// A set of informers (list + watch) that survive the API server going away: the caches keep their
// last contents (so whatever they drive keeps its last good state), and each lost watch is restarted
// with exponential backoff and relists on reconnect. Shared by the controller and the node agent.
import type { KubernetesObject, ListWatch } from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface InformerHooks {
  /** Any add, update or delete in any cache, and once after the first complete list. */
  onChange: () => void;
  onConnection: (connected: boolean) => void;
}

const FIRST_BACKOFF_MS = 500;
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Drops what no reader here needs from an object the cache holds (the callbacks get the cached
 * object itself): field-manager bookkeeping and kubectl's copy of the last applied object are
 * often as big as the rest, and 10,000 Services and their slices stay in memory.
 */
function slim(obj: KubernetesObject): void {
  if (!obj.metadata) return;
  delete obj.metadata.managedFields;
  if (obj.metadata.annotations) delete obj.metadata.annotations[LAST_APPLIED];
}
const MAX_BACKOFF_MS = 30_000;

export class ResilientInformers {
  private readonly log: Logger;
  private readonly hooks: InformerHooks;
  private readonly informers: ListWatch<KubernetesObject>[] = [];
  private readonly restarts = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(log: Logger, hooks: InformerHooks) {
    this.log = log;
    this.hooks = hooks;
  }

  add<T extends KubernetesObject>(name: string, informer: ListWatch<T>): ListWatch<T> {
    let backoff = FIRST_BACKOFF_MS;
    for (const verb of ["add", "update"] as const) informer.on(verb, slim);
    for (const verb of ["add", "update", "delete"] as const) informer.on(verb, () => this.hooks.onChange());
    // "connect" comes before the (re)list lands in the cache; the cache changes trigger runs.
    informer.on("connect", () => {
      backoff = FIRST_BACKOFF_MS;
      this.hooks.onConnection(true);
    });
    informer.on("error", (err: unknown) => {
      // stop() aborts the watch, which also ends in an error: that one must not restart it.
      if (this.stopped) return;
      this.hooks.onConnection(false);
      this.log.warn({ err, watch: name, retryInMs: backoff }, "watch lost; serving the last known state");
      const timer = setTimeout(() => {
        this.restarts.delete(timer);
        if (this.stopped) return;
        informer
          .start()
          .catch((e: unknown) => this.log.warn({ err: e, watch: name }, "watch restart failed"));
      }, backoff);
      this.restarts.add(timer);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    });
    this.informers.push(informer);
    return informer;
  }

  async start(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.start()));
    this.hooks.onChange();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.restarts) clearTimeout(t);
    this.restarts.clear();
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  /**
   * Every cache holds a complete list. Before that, an empty cache means "not known yet", not
   * "nothing there": acting on it would remove state a restarted process adopted.
   */
  synced(): boolean {
    return this.informers.every((i) => i.latestResourceVersion() !== "");
  }
}
