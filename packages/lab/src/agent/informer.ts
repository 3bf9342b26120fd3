// List + watch of one kind of object (client-node's ListWatch) that keeps going: a lost watch (or a
// failed list) is started again with exponential back-off, while the cache keeps its last contents.
// The cached objects are plain JSON (timestamps as strings), the same shape whether they came from
// the list or from a watch event.
import {
  ListWatch,
  type KubernetesListObject,
  type KubernetesObject,
  type Watch,
} from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface InformerOptions<T extends KubernetesObject> {
  name: string;
  path: string;
  watch: Watch;
  list: () => Promise<KubernetesListObject<T>>;
  fieldSelector?: string;
  log: Logger;
  /** Any add, update or delete (with the object), and once after each complete list (without). */
  onChange: (obj?: T) => void;
}

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;

export class Informer<T extends KubernetesObject> {
  readonly #o: InformerOptions<T>;
  readonly #lw: ListWatch<T>;
  readonly #firstSync: Promise<void>;
  #markSynced: () => void = () => undefined;
  #backoff = FIRST_RETRY_MS;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(o: InformerOptions<T>) {
    this.#o = o;
    const list = async (): Promise<KubernetesListObject<T>> => {
      const l = await o.list();
      return { ...l, items: l.items.map((i) => JSON.parse(JSON.stringify(i)) as T) };
    };
    this.#lw = new ListWatch<T>(o.path, o.watch, list, false, undefined, o.fieldSelector);
    this.#firstSync = new Promise((resolve) => (this.#markSynced = resolve));
    for (const verb of ["add", "update", "delete"] as const) this.#lw.on(verb, (obj: T) => o.onChange(obj));
    this.#lw.on("connect", () => (this.#backoff = FIRST_RETRY_MS));
    this.#lw.on("error", (err: unknown) => this.#retryLater(err));
  }

  /**
   * Starts listing and watching; resolves after the first complete list (a failed list is retried,
   * so this waits for the API server as long as it takes, or until stop()).
   */
  start(): Promise<void> {
    this.#run();
    return this.#firstSync;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    this.#markSynced();
    await this.#lw.stop();
  }

  list(): readonly T[] {
    return this.#lw.list();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#lw.get(name, namespace);
  }

  /** A complete list has arrived (an empty cache before that means "not known yet"). */
  synced(): boolean {
    return this.#lw.latestResourceVersion() !== "";
  }

  #run(): void {
    // ListWatch.start resolves also when its list failed: it reports that as an error event.
    this.#lw
      .start()
      .then(() => {
        if (this.#stopped || !this.synced()) return;
        this.#markSynced();
        this.#o.onChange();
      })
      .catch((err: unknown) => this.#retryLater(err));
  }

  #retryLater(err: unknown): void {
    // stop() aborts the watch, which ends in an error too.
    if (this.#stopped) return;
    const delay = this.#backoff;
    this.#o.log.warn(
      { err, watch: this.#o.name, retryInMs: delay },
      "watch lost; keeping the last known state",
    );
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => this.#run(), delay);
    this.#backoff = Math.min(delay * 2, MAX_RETRY_MS);
  }
}
