// Whether NetworkPolicies let direct server return reach a Service's backends. The LB pods hand
// each packet to a backend pod in VXLAN (UDP 4789, the nftables engine) or in IPIP (IP protocol 4,
// IPVS tunnel mode), from the LB pod's address; a policy that selects the backends for Ingress and
// allows no such packet makes the backend drop every DSR flow without a trace (where the CNI
// enforces policies: Calico, Cilium, kube-router; flannel does not). A policy's ports can name
// only TCP, UDP and SCTP: only a rule without ports admits IPIP.
// Pure: the controller and the node agent decide alike from the same objects.
import type {
  V1LabelSelector,
  V1NetworkPolicy,
  V1NetworkPolicyPeer,
  V1NetworkPolicyPort,
  V1Service,
} from "@kubernetes/client-node";
import {
  LB_APP_LABEL,
  LB_POD_LABELS,
  cidrRange,
  cidrsOverlap,
  isIpv4Cidr,
  type LbConfig,
} from "@portable-lb/core/config";
import { DSR_UDP_PORT } from "../dataplane/dsr/dsrTunnel.ts";

/** The label the API server sets on every namespace: its name. */
export const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

/** Who sends the DSR tunnel's packets. */
export interface LbPeers {
  /** The LB pods' namespace. */
  namespace: string;
  /** Every LB pod's labels. */
  podLabels: Readonly<Record<string, string>>;
  /** The labels a rule selects the LB pods by (some of podLabels). */
  podSelector: Readonly<Record<string, string>>;
  /** The pod network the LB pods' addresses come from. */
  podCidr: string;
  /** The tunnel they send: VXLAN (nftables engine) or IPIP (IPVS tunnel mode). */
  tunnel: "vxlan" | "ipip";
}

/** The LB pods of `namespace` under `config`: what the controller and the node agent both use. */
export function lbPeers(config: LbConfig, namespace: string): LbPeers {
  return {
    namespace,
    podLabels: LB_POD_LABELS,
    podSelector: { app: LB_APP_LABEL },
    podCidr: config.podCidr,
    // DSR runs on IPVS only where the engine is forced (controller.ts): `auto` picks nftables.
    tunnel: config.dataPlane.engine === "ipvs" ? "ipip" : "vxlan",
  };
}

/** The tunnel as an Event names it. */
export function tunnelName(lb: LbPeers): string {
  return lb.tunnel === "ipip"
    ? "IPIP (IP protocol 4, IPVS tunnel mode: only a rule without ports admits it)"
    : `UDP ${DSR_UDP_PORT}`;
}

type Labels = Readonly<Record<string, string>>;

/**
 * Whether `selector` selects objects with `labels`: true, false, or undefined when that depends on
 * labels not known (`complete` false: `labels` are only some of the object's, as a Service's
 * selector is of its pods').
 */
export function selects(selector: V1LabelSelector, labels: Labels, complete: boolean): boolean | undefined {
  const verdicts: (boolean | undefined)[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {}))
    verdicts.push(key in labels ? labels[key] === value : complete ? false : undefined);
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const known = key in labels;
    if (!known && !complete) {
      verdicts.push(undefined);
      continue;
    }
    const has = known && values.includes(labels[key]!);
    verdicts.push(
      operator === "In"
        ? has
        : operator === "NotIn"
          ? !has
          : operator === "Exists"
            ? known
            : operator === "DoesNotExist"
              ? !known
              : undefined,
    );
  }
  if (verdicts.includes(false)) return false;
  return verdicts.includes(undefined) ? undefined : true;
}

/**
 * A policy restricts the Service's backends' ingress when it is of type Ingress (a policy without
 * policyTypes always is) and its podSelector may select them: a selector that cannot be decided
 * from the Service's selector counts (a false warning is better than a black hole).
 */
function restrictsBackends(policy: V1NetworkPolicy, svc: V1Service): boolean {
  const types = policy.spec?.policyTypes;
  if (types && !types.includes("Ingress")) return false;
  return selects(policy.spec?.podSelector ?? {}, svc.spec?.selector ?? {}, false) !== false;
}

/**
 * The ports allow the tunnel: none listed (all protocols), or for VXLAN UDP with 4789 in
 * port..endPort (no port: all).
 */
function portsAllowTunnel(ports: V1NetworkPolicyPort[] | undefined, lb: LbPeers): boolean {
  if (!ports || ports.length === 0) return true;
  if (lb.tunnel === "ipip") return false;
  return ports.some((p) => {
    if ((p.protocol ?? "TCP") !== "UDP") return false;
    if (p.port === undefined) return true;
    // A named port names a container's port; the tunnel ends in the kernel, on none.
    if (typeof p.port !== "number") return false;
    return p.port <= DSR_UDP_PORT && DSR_UDP_PORT <= (p.endPort ?? p.port);
  });
}

/** A peer includes every LB pod (by namespace and labels, or by an address block holding them all). */
function peerIsLb(peer: V1NetworkPolicyPeer, policyNamespace: string, lb: LbPeers): boolean {
  if (peer.ipBlock) {
    const { cidr, except = [] } = peer.ipBlock;
    if (!isIpv4Cidr(cidr) || !isIpv4Cidr(lb.podCidr)) return false;
    const block = cidrRange(cidr);
    const pods = cidrRange(lb.podCidr);
    // An exception within the pod network may take out an LB pod's address: counted as not all.
    const holds = block.first <= pods.first && pods.last <= block.last;
    return holds && !except.some((e) => !isIpv4Cidr(e) || cidrsOverlap(e, lb.podCidr));
  }
  const namespaceOk = peer.namespaceSelector
    ? selects(peer.namespaceSelector, { [NAMESPACE_NAME_LABEL]: lb.namespace }, true) === true
    : policyNamespace === lb.namespace;
  return namespaceOk && selects(peer.podSelector ?? {}, lb.podLabels, true) === true;
}

/**
 * Some ingress rule of the policy admits the tunnel from the LB pods. A rule's `from` is `_from` in
 * the client's model (the watch cache holds it so: clusterWatch.ts trimPolicy).
 */
function allowsTunnel(policy: V1NetworkPolicy, lb: LbPeers): boolean {
  const namespace = policy.metadata?.namespace ?? "";
  return (policy.spec?.ingress ?? []).some(
    (rule) =>
      portsAllowTunnel(rule.ports, lb) &&
      (!rule._from || rule._from.length === 0 || rule._from.some((peer) => peerIsLb(peer, namespace, lb))),
  );
}

/**
 * The policies (`namespace/name`, sorted) that restrict the Service's backends when together they
 * allow no DSR tunnel packet from the LB pods; empty when the tunnel gets through (policies add up:
 * one that allows it is enough), or when none restricts them.
 */
export function policiesBlockingDsr(svc: V1Service, policies: V1NetworkPolicy[], lb: LbPeers): string[] {
  const namespace = svc.metadata?.namespace ?? "";
  const restricting = policies.filter(
    (p) => (p.metadata?.namespace ?? "") === namespace && restrictsBackends(p, svc),
  );
  if (restricting.some((p) => allowsTunnel(p, lb))) return [];
  return restricting.map((p) => `${namespace}/${p.metadata?.name ?? ""}`).sort();
}

/** The ingress rule that lets the tunnel in, as a policy's `spec.ingress` item. */
export function tunnelRule(lb: LbPeers) {
  return {
    from: [
      {
        namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: lb.namespace } },
        podSelector: { matchLabels: lb.podSelector },
      },
    ],
    ...(lb.tunnel === "vxlan" && { ports: [{ protocol: "UDP", port: DSR_UDP_PORT }] }),
  };
}
