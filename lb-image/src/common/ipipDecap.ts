// Whether a node's kernel decapsulates IPIP, as its node agent found out and tells the LB pods. With
// the IPVS engine, direct server return is IPVS tunnel mode (IPIP), so a backend on a node without
// ipip would get packets it cannot unwrap. The node agent keeps one Lease per node in the LB
// namespace saying so; the controllers (and every node agent, which decides as they do) serve
// ports with backends on such a node by SNAT instead. A Lease because the agents may write their
// own namespace's Leases, where writing Nodes would take cluster-wide rights over every node.
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";

/** On each such Lease: "true" or "false". */
export const IPIP_DECAP_LABEL = "portable-lb.io/ipip-decap";
const NAME_PREFIX = "portable-lb-ipip-";

/** The node's Lease (holderIdentity: the node's name). */
export const ipipDecapLeaseName = (node: string) => `${NAME_PREFIX}${node}`;

/** A node's say: its Lease's holder (under that node's Lease name), and what it says. */
function said(lease: V1Lease): { node: string; decap: boolean } | undefined {
  const node = lease.spec?.holderIdentity;
  const value = lease.metadata?.labels?.[IPIP_DECAP_LABEL];
  if (!node || lease.metadata?.name !== ipipDecapLeaseName(node)) return undefined;
  return value === "true" || value === "false" ? { node, decap: value === "true" } : undefined;
}

/** The nodes whose agents found no ipip in their kernels. */
export function nodesWithoutIpip(leases: Iterable<V1Lease>): Set<string> {
  const nodes = new Set<string>();
  for (const lease of leases) {
    const s = said(lease);
    if (s && !s.decap) nodes.add(s.node);
  }
  return nodes;
}

/** What the node's own Lease says, if there is one. */
export function saidOf(leases: Iterable<V1Lease>, node: string): boolean | undefined {
  for (const lease of leases) {
    const s = said(lease);
    if (s?.node === node) return s.decap;
  }
  return undefined;
}

/** Writes the node's Lease when it says otherwise or is missing. */
export async function recordIpipDecap(
  api: CoordinationV1Api,
  namespace: string,
  node: string,
  decap: boolean,
): Promise<void> {
  const name = ipipDecapLeaseName(node);
  const value = String(decap);
  let lease: V1Lease | undefined;
  try {
    lease = await api.readNamespacedLease({ name, namespace });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
  }
  if (lease?.metadata?.labels?.[IPIP_DECAP_LABEL] === value && lease.spec?.holderIdentity === node) return;
  const metadata = {
    ...(lease?.metadata ?? { name, namespace }),
    labels: { ...lease?.metadata?.labels, [IPIP_DECAP_LABEL]: value },
  };
  const body = { metadata, spec: { ...lease?.spec, holderIdentity: node } };
  if (lease) await api.replaceNamespacedLease({ name, namespace, body });
  else await api.createNamespacedLease({ namespace, body });
}
