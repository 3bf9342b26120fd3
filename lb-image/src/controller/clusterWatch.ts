// Watches Services and EndpointSlices through informers (list + watch, no polling). When the API
// server goes away, the caches keep their last contents, so the data plane keeps serving what it
// served; the informers are restarted with backoff and resync on reconnect.
import {
  CoreV1Api,
  DiscoveryV1Api,
  ListWatch,
  Watch,
  type KubeConfig,
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
  private readonly serviceInformer: ListWatch<V1Service>;
  private readonly sliceInformer: ListWatch<V1EndpointSlice>;
  private readonly log: Logger;

  private readonly hooks: WatchHooks;
  private stopped = false;
  private readonly restarts = new Set<NodeJS.Timeout>();

  constructor(kc: KubeConfig, log: Logger, hooks: WatchHooks) {
    this.log = log;
    this.hooks = hooks;
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const watch = new Watch(kc);
    this.serviceInformer = new ListWatch(
      "/api/v1/services",
      watch,
      () => core.listServiceForAllNamespaces(),
      false,
    );
    this.sliceInformer = new ListWatch(
      "/apis/discovery.k8s.io/v1/endpointslices",
      watch,
      () => discovery.listEndpointSliceForAllNamespaces(),
      false,
    );
    this.wire("services", this.serviceInformer, hooks);
    this.wire("endpointslices", this.sliceInformer, hooks);
  }

  private wire<T extends KubernetesObject>(name: string, informer: ListWatch<T>, hooks: WatchHooks): void {
    let backoff = 500;
    for (const verb of ["add", "update", "delete"] as const) informer.on(verb, () => hooks.onChange());
    // "connect" comes before the (re)list lands in the cache; the cache changes trigger runs.
    informer.on("connect", () => {
      backoff = 500;
      hooks.onConnection(true);
    });
    informer.on("error", (err: unknown) => {
      // stop() aborts the watch, which also ends in an error: that one must not restart it.
      if (this.stopped) return;
      hooks.onConnection(false);
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
  }

  async start(): Promise<void> {
    await Promise.all([this.serviceInformer.start(), this.sliceInformer.start()]);
    this.hooks.onChange();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.restarts) clearTimeout(t);
    this.restarts.clear();
    await Promise.all([this.serviceInformer.stop(), this.sliceInformer.stop()]);
  }

  /**
   * Both caches hold a complete list. Before that, an empty cache means "not known yet", not "no
   * Services": applying it would flush the rules a restarted controller adopted.
   */
  synced(): boolean {
    return (
      this.serviceInformer.latestResourceVersion() !== "" && this.sliceInformer.latestResourceVersion() !== ""
    );
  }
  services(): V1Service[] {
    return [...this.serviceInformer.list()];
  }
  slices(): V1EndpointSlice[] {
    return [...this.sliceInformer.list()];
  }
}
