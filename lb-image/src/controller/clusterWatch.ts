// Watches Services and EndpointSlices (and, for direct server return, NetworkPolicies) through
// informers (list + watch, no polling). When the API server goes away, the caches keep their last
// contents, so the data plane keeps serving what it served; the informers are restarted with
// backoff and resync on reconnect.
import {
  CoreV1Api,
  DiscoveryV1Api,
  NetworkingV1Api,
  Watch,
  type KubeConfig,
  type ListWatch,
  type V1EndpointSlice,
  type V1NetworkPolicy,
  type V1NetworkPolicyIngressRule,
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

/**
 * Keeps of a policy its ingress side, in the client's model: a listed policy's rules carry `_from`,
 * a watched one's the wire's `from`, and readers see one shape.
 */
function trimPolicy(policy: V1NetworkPolicy): void {
  if (policy.metadata) delete policy.metadata.annotations;
  if (!policy.spec) return;
  delete policy.spec.egress;
  for (const rule of policy.spec.ingress ?? []) {
    const wire = rule as V1NetworkPolicyIngressRule & { from?: V1NetworkPolicyIngressRule["_from"] };
    if (wire.from !== undefined) {
      wire._from = wire.from;
      delete wire.from;
    }
  }
}

export interface ServiceInformers {
  services: ListWatch<V1Service>;
  slices: ListWatch<V1EndpointSlice>;
  /** With `networkPolicies` asked for. */
  networkPolicies?: ListWatch<V1NetworkPolicy>;
}

/**
 * Services and EndpointSlices of every namespace, as informers in `informers`; NetworkPolicies too
 * when `networkPolicies` (direct server return: they may keep its tunnel from the backends).
 */
export function serviceInformers(
  informers: ResilientInformers,
  kc: KubeConfig,
  networkPolicies = false,
): ServiceInformers {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const watch = new Watch(kc);
  const networking = networkPolicies ? kc.makeApiClient(NetworkingV1Api) : undefined;
  return {
    ...(networking && {
      networkPolicies: informers.add<V1NetworkPolicy>("networkpolicies", {
        path: "/apis/networking.k8s.io/v1/networkpolicies",
        watch,
        list: (page) => networking.listNetworkPolicyForAllNamespaces(page),
        trim: trimPolicy,
      }),
    }),
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
  private readonly watched: ServiceInformers;

  /** `networkPolicies`: watch them too (see serviceInformers). */
  constructor(kc: KubeConfig, log: Logger, hooks: InformerHooks, networkPolicies = false) {
    this.informers = new ResilientInformers(log, hooks);
    this.watched = serviceInformers(this.informers, kc, networkPolicies);
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
    return [...this.watched.services.list()];
  }
  slices(): V1EndpointSlice[] {
    return [...this.watched.slices.list()];
  }
  networkPolicies(): V1NetworkPolicy[] | undefined {
    return this.watched.networkPolicies && [...this.watched.networkPolicies.list()];
  }
}
