// NetworkPolicies on DSR backends, as the integration tests write them: one policy selecting the
// backends (app=web) for Ingress and admitting UDP 4789 (the DSR tunnel) from the given peers only.
import type { NetworkingV1Api, V1NetworkPolicy, V1NetworkPolicyPeer } from "@kubernetes/client-node";

export const POLICY_NAME = "web-ingress";

export function tunnelPolicy(namespace: string, from: V1NetworkPolicyPeer[]): V1NetworkPolicy {
  return {
    metadata: { name: POLICY_NAME, namespace },
    spec: {
      podSelector: { matchLabels: { app: "web" } },
      policyTypes: ["Ingress"],
      ingress: [{ _from: from, ports: [{ protocol: "UDP", port: 4789 }] }],
    },
  };
}

/** Every pod of namespace `name`. */
export const namespacePeer = (name: string): V1NetworkPolicyPeer => ({
  namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": name } },
});

/** The LB pods of namespace `name`, as the README's rule selects them. */
export const lbPodsPeer = (name: string): V1NetworkPolicyPeer => ({
  ...namespacePeer(name),
  podSelector: { matchLabels: { app: "portable-lb-controller" } },
});

/** Replaces the policy's rule's peers (a change the watchers see as an update). */
export async function replaceTunnelPolicy(
  api: NetworkingV1Api,
  namespace: string,
  from: V1NetworkPolicyPeer[],
): Promise<void> {
  const current = await api.readNamespacedNetworkPolicy({ name: POLICY_NAME, namespace });
  const body = tunnelPolicy(namespace, from);
  body.metadata!.resourceVersion = current.metadata?.resourceVersion;
  await api.replaceNamespacedNetworkPolicy({ name: POLICY_NAME, namespace, body });
}
