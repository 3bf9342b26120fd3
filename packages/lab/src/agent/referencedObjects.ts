// The ConfigMaps and Secrets the agent's pods use (volumes, env), each watched on its own (field
// selector metadata.name, as the kubelet's watch-based strategy does) while a pod references it: the
// cache answers env and volume lookups, and a change re-projects the volumes of the pods using it
// (env of a running container does not change, as on a real node).
import type { CoreV1Api, KubernetesObject, V1ConfigMap, V1Secret, Watch } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { Informer } from "./informer.ts";

export type ObjectKind = "configmaps" | "secrets";

export interface ObjectRef {
  kind: ObjectKind;
  namespace: string;
  name: string;
}

const LIST_WAIT_MS = 10_000;

export function refKey(r: ObjectRef): string {
  return `${r.kind}/${r.namespace}/${r.name}`;
}

interface Watched {
  informer: Informer<KubernetesObject>;
  users: Set<string>;
  started: Promise<void>;
}

export class ReferencedObjects {
  readonly #core: CoreV1Api;
  readonly #watch: Watch;
  readonly #log: Logger;
  readonly #onChange: (users: string[]) => void;
  readonly #watched = new Map<string, Watched>();

  /** `onChange` gets the users (pod UIDs) of an object that changed. */
  constructor(core: CoreV1Api, watch: Watch, log: Logger, onChange: (users: string[]) => void) {
    this.#core = core;
    this.#watch = watch;
    this.#log = log;
    this.#onChange = onChange;
  }

  /** Makes `user` reference exactly `refs`: starts the watches it newly needs, stops unused ones. */
  async use(user: string, refs: ObjectRef[]): Promise<void> {
    const keys = new Set(refs.map(refKey));
    for (const [key, w] of this.#watched) {
      if (w.users.has(user) && !keys.has(key)) this.#drop(key, user);
    }
    const starting: Promise<void>[] = [];
    for (const r of refs) {
      const key = refKey(r);
      let w = this.#watched.get(key);
      if (!w) {
        w = this.#start(r, key);
        this.#watched.set(key, w);
      }
      w.users.add(user);
      starting.push(w.started);
    }
    // Bounded: a pod waiting for an API server that is gone must still notice its own deletion.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error("ConfigMaps/Secrets not listed yet (API server unreachable?)")),
        LIST_WAIT_MS,
      );
    });
    try {
      await Promise.race([Promise.all(starting), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  release(user: string): void {
    for (const [key, w] of this.#watched) if (w.users.has(user)) this.#drop(key, user);
  }

  configMap(namespace: string, name: string): V1ConfigMap | undefined {
    return this.#watched.get(refKey({ kind: "configmaps", namespace, name }))?.informer.get(name, namespace);
  }

  secret(namespace: string, name: string): V1Secret | undefined {
    return this.#watched.get(refKey({ kind: "secrets", namespace, name }))?.informer.get(name, namespace);
  }

  async stop(): Promise<void> {
    const all = [...this.#watched.values()];
    this.#watched.clear();
    await Promise.all(all.map((w) => w.informer.stop()));
  }

  #start(r: ObjectRef, key: string): Watched {
    const fieldSelector = `metadata.name=${r.name}`;
    const users = new Set<string>();
    const informer = new Informer<KubernetesObject>({
      name: key,
      path: `/api/v1/namespaces/${r.namespace}/${r.kind}`,
      watch: this.#watch,
      fieldSelector,
      log: this.#log,
      list: () =>
        r.kind === "configmaps"
          ? this.#core.listNamespacedConfigMap({ namespace: r.namespace, fieldSelector })
          : this.#core.listNamespacedSecret({ namespace: r.namespace, fieldSelector }),
      onChange: () => {
        if (informer.synced()) this.#onChange([...users]);
      },
    });
    return { informer, users, started: informer.start() };
  }

  #drop(key: string, user: string): void {
    const w = this.#watched.get(key);
    if (!w) return;
    w.users.delete(user);
    if (w.users.size === 0) {
      this.#watched.delete(key);
      void w.informer.stop();
    }
  }
}
