// Watches Services and EndpointSlices through informers (list + watch, no polling). When the API
// server goes away, the caches keep their last contents, so the data plane keeps serving what it
// served; the informers are restarted with backoff and resync on reconnect.
import {
  CoreV1Api,
  DiscoveryV1Api,
  ListWatch,
  Watch,
  type KubeConfig,
  type V1EndpointSlice,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { ResilientInformers, type InformerHooks } from "../kube/informers.ts";
import type { ClusterView } from "./reconciler.ts";

export class ClusterWatch implements ClusterView {
  private readonly informers: ResilientInformers;
  private readonly serviceInformer: ListWatch<V1Service>;
  private readonly sliceInformer: ListWatch<V1EndpointSlice>;

  constructor(kc: KubeConfig, log: Logger, hooks: InformerHooks) {
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const watch = new Watch(kc);
    this.informers = new ResilientInformers(log, hooks);
    this.serviceInformer = this.informers.add(
      "services",
      new ListWatch("/api/v1/services", watch, () => core.listServiceForAllNamespaces(), false),
    );
    this.sliceInformer = this.informers.add(
      "endpointslices",
      new ListWatch(
        "/apis/discovery.k8s.io/v1/endpointslices",
        watch,
        () => discovery.listEndpointSliceForAllNamespaces(),
        false,
      ),
    );
  }

  start(): Promise<void> {
    return this.informers.start();
  }
  stop(): Promise<void> {
    return this.informers.stop();
  }
  synced(): boolean {
    return this.informers.synced();
  }
  services(): V1Service[] {
    return [...this.serviceInformer.list()];
  }
  slices(): V1EndpointSlice[] {
    return [...this.sliceInformer.list()];
  }
}
