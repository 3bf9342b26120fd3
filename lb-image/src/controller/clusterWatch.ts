// Watches Services and EndpointSlices through informers (list + watch, no polling). When the API
// server goes away, the caches keep their last contents, so the data plane keeps serving what it
// served; the informers are restarted with backoff and resync on reconnect.
import {
  CoreV1Api,
  DiscoveryV1Api,
  makeInformer,
  type Informer,
  type KubeConfig,
  type ObjectCache,
  type KubernetesObject,
  type V1EndpointSlice,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { ClusterView } from "./reconciler.ts";

export interface WatchHooks {
  onChange: () => void;
  onConnection: (connected: boolean) => void;
}

const MAX_BACKOFF_MS = 30_000;

export class ClusterWatch implements ClusterView {
  private readonly serviceInformer: Informer<V1Service> & ObjectCache<V1Service>;
  private readonly sliceInformer: Informer<V1EndpointSlice> & ObjectCache<V1EndpointSlice>;
  private readonly started = new Set<string>();
  private readonly log: Logger;

  constructor(kc: KubeConfig, log: Logger, hooks: WatchHooks) {
    this.log = log;
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    this.serviceInformer = makeInformer(kc, "/api/v1/services", () => core.listServiceForAllNamespaces());
    this.sliceInformer = makeInformer(kc, "/apis/discovery.k8s.io/v1/endpointslices", () =>
      discovery.listEndpointSliceForAllNamespaces(),
    );
    this.wire("services", this.serviceInformer, hooks);
    this.wire("endpointslices", this.sliceInformer, hooks);
  }

  private wire<T extends KubernetesObject>(name: string, informer: Informer<T>, hooks: WatchHooks): void {
    let backoff = 500;
    for (const verb of ["add", "update", "delete"] as const) informer.on(verb, () => hooks.onChange());
    informer.on("connect", () => {
      backoff = 500;
      this.started.add(name);
      hooks.onConnection(true);
      hooks.onChange();
    });
    informer.on("error", (err: unknown) => {
      hooks.onConnection(false);
      this.log.warn({ err, watch: name, retryInMs: backoff }, "watch lost; serving the last known state");
      setTimeout(() => {
        informer
          .start()
          .catch((e: unknown) => this.log.warn({ err: e, watch: name }, "watch restart failed"));
      }, backoff);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    });
  }

  async start(): Promise<void> {
    await Promise.all([this.serviceInformer.start(), this.sliceInformer.start()]);
  }

  async stop(): Promise<void> {
    await Promise.all([this.serviceInformer.stop(), this.sliceInformer.stop()]);
  }

  /** Both caches have been listed at least once. */
  synced(): boolean {
    return this.started.size === 2;
  }
  services(): V1Service[] {
    return [...this.serviceInformer.list()];
  }
  slices(): V1EndpointSlice[] {
    return [...this.sliceInformer.list()];
  }
}
