// Watches Services and EndpointSlices (and, for direct server return, NetworkPolicies, and in IPVS
// tunnel mode the nodes' IPIP Leases: common/ipipDecap.ts) through informers (list + watch, no
// polling). When the API server goes away, the caches keep their last contents, so the data plane
// keeps serving what it served; the informers are restarted with backoff and resync on reconnect.
import {
  CoordinationV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  NetworkingV1Api,
  Watch,
  type KubeConfig,
  type ListWatch,
  type V1EndpointSlice,
  type V1Lease,
  type V1NetworkPolicy,
  type V1NetworkPolicyIngressRule,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { IPIP_DECAP_LABEL, nodesWithoutIpip } from "../common/ipipDecap.ts";
import { ResilientInformers, type InformerHooks } from "../kube/informers.ts";
import type { LbPeers } from "./dsrPolicy.ts";
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
  /** With direct server return. */
  networkPolicies?: ListWatch<V1NetworkPolicy>;
  /** With direct server return in IPIP (the IPVS engine's tunnel mode), in the LB namespace. */
  ipipDecapLeases?: ListWatch<V1Lease>;
}

/**
 * Services and EndpointSlices of every namespace, as informers in `informers`; with direct server
 * return (`dsr`: who sends its tunnel) NetworkPolicies too, which may keep the tunnel from the
 * backends, and for an IPIP tunnel the Leases saying which nodes cannot decapsulate it.
 */
export function serviceInformers(
  informers: ResilientInformers,
  kc: KubeConfig,
  dsr?: LbPeers,
): ServiceInformers {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  const watch = new Watch(kc);
  const networking = dsr ? kc.makeApiClient(NetworkingV1Api) : undefined;
  const coordination = dsr?.tunnel === "ipip" ? kc.makeApiClient(CoordinationV1Api) : undefined;
  return {
    ...(coordination && {
      ipipDecapLeases: informers.add<V1Lease>("leases", {
        path: `/apis/coordination.k8s.io/v1/namespaces/${dsr!.namespace}/leases`,
        watch,
        list: (page) =>
          coordination.listNamespacedLease({
            namespace: dsr!.namespace,
            labelSelector: IPIP_DECAP_LABEL,
            ...page,
          }),
        labelSelector: IPIP_DECAP_LABEL,
      }),
    }),
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

  /** `dsr`: watch what direct server return depends on too (see serviceInformers). */
  constructor(kc: KubeConfig, log: Logger, hooks: InformerHooks, dsr?: LbPeers) {
    this.informers = new ResilientInformers(log, hooks);
    this.watched = serviceInformers(this.informers, kc, dsr);
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
  nodesWithoutIpip(): ReadonlySet<string> | undefined {
    return this.watched.ipipDecapLeases && nodesWithoutIpip(this.watched.ipipDecapLeases.list());
  }
}
