// Watches Services and EndpointSlices through informers (list + watch, no polling). When the API
// server goes away, the caches keep their last contents, so the data plane keeps serving what it
// served; the informers are restarted with backoff and resync on reconnect.
import {
  CoreV1Api,
  DiscoveryV1Api,
  Watch,
  type KubeConfig,
  type ListWatch,
  type V1EndpointSlice,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { ResilientInformers, type InformerHooks } from "../kube/informers.ts";
import type { ClusterView } from "./reconciler.ts";

/**
 * Keeps of a slice what the desired state reads: its service label, ports, and each endpoint's
 * addresses, conditions and node (direct server return prepares the backend's node). The rest
 * (targetRef, zone, hints, owner references) is most of a slice's size, and there are as many
 * slices as Services.
 */
function trimSlice(slice: V1EndpointSlice): void {
  if (slice.metadata) {
    delete slice.metadata.ownerReferences;
    delete slice.metadata.annotations;
    delete slice.metadata.generateName;
  }
  slice.endpoints = slice.endpoints?.map(({ addresses, conditions, nodeName }) => ({
    addresses,
    conditions,
    ...(nodeName !== undefined && { nodeName }),
  }));
}

/** Services and EndpointSlices of every namespace, as informers in `informers`. */
export function serviceInformers(
  informers: ResilientInformers,
  kc: KubeConfig,
): { services: ListWatch<V1Service>; slices: ListWatch<V1EndpointSlice> } {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const watch = new Watch(kc);
  return {
    services: informers.add<V1Service>("services", {
      path: "/api/v1/services",
      watch,
      list: (page) => core.listServiceForAllNamespaces(page),
    }),
    slices: informers.add<V1EndpointSlice>("endpointslices", {
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      watch,
      list: (page) => discovery.listEndpointSliceForAllNamespaces(page),
      trim: trimSlice,
    }),
  };
}

export class ClusterWatch implements ClusterView {
  private readonly informers: ResilientInformers;
  private readonly serviceInformer: ListWatch<V1Service>;
  private readonly sliceInformer: ListWatch<V1EndpointSlice>;

  constructor(kc: KubeConfig, log: Logger, hooks: InformerHooks) {
    this.informers = new ResilientInformers(log, hooks);
    ({ services: this.serviceInformer, slices: this.sliceInformer } = serviceInformers(this.informers, kc));
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
