// A set of informers (list + watch) that survive the API server going away: the caches keep their
// last contents (so whatever they drive keeps its last good state), and each lost watch is restarted
// with exponential backoff and relists on reconnect. Shared by the controller and the node agent.
// Lists come in pages, and each object is trimmed to what its reader needs as it arrives, so that
// 10,000 Services and their EndpointSlices never sit in memory as one response or as full objects.
import {
  ListWatch,
  type KubernetesListObject,
  type KubernetesObject,
  type V1ListMeta,
  type Watch,
} from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface InformerHooks {
  /** Any add, update or delete in any cache, and once after the first complete list. */
  onChange: () => void;
  onConnection: (connected: boolean) => void;
}

/** What a generated client's list call returns. */
interface ListPage<T> {
  items: T[];
  metadata?: V1ListMeta;
}

export interface InformerSource<T extends KubernetesObject> {
  /** The watch path, e.g. /api/v1/services. */
  path: string;
  watch: Watch;
  /** One page of the list: the generated client's list call with these paging parameters. */
  list: (page: { limit: number; _continue?: string }) => Promise<ListPage<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  /** Removes, in place, fields no reader of this cache uses (on top of the common ones). */
  trim?: (obj: T) => void;
}

/**
 * Objects per LIST page: what kube-controller-manager's reflectors use. The API server serves all
 * pages from one consistent snapshot, so the watch starts from the last page's resourceVersion.
 */
export const LIST_PAGE_SIZE = 500;

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

/**
 * A listed object as the plain JSON a watch event carries. The generated client's deserializer
 * gives every object all its model's fields (most undefined) and grows every array from empty, which
 * leaves ~17 slots in each; at 10,000 Services that was ~30 MB of a ~160 MB heap. Timestamps become
 * strings, as in watch events, so every reader already handles them.
 */
function compact<T extends KubernetesObject>(obj: T, trim: (o: T) => void): T {
  trim(obj);
  return JSON.parse(JSON.stringify(obj)) as T;
}

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

  add<T extends KubernetesObject>(name: string, source: InformerSource<T>): ListWatch<T> {
    const trim = (obj: T) => {
      slim(obj);
      source.trim?.(obj);
    };
    const list = async (): Promise<KubernetesListObject<T>> => {
      const items: T[] = [];
      let page: ListPage<T> = { items: [] };
      do {
        page = await source.list({ limit: LIST_PAGE_SIZE, _continue: page.metadata?._continue });
        for (const obj of page.items) items.push(compact(obj, trim));
      } while (page.metadata?._continue);
      return { ...page, items };
    };
    const informer = new ListWatch<T>(
      source.path,
      source.watch,
      list,
      false,
      source.labelSelector,
      source.fieldSelector,
    );
    let backoff = FIRST_BACKOFF_MS;
    // Watch events arrive as whole objects too.
    for (const verb of ["add", "update"] as const) informer.on(verb, trim);
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
