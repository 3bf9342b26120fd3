// Where a platform's LB pods are, as the other platform's LB pods see them in a handover: the nodes
// they run on (the router's ECMP next hops, where relayed flows are sent) and the pods' own
// addresses, which relayed tunnel packets leave from (the node untracks the DSR tunnel, so flannel
// does not masquerade them). Read from the platform's cluster through the kubeconfig its stack hands
// out, so nothing is typed by hand.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import { LB_APP_LABEL } from "@portable-lb/core/config";

export interface LbPods {
  /** The nodes the running LB pods are on, sorted. */
  nodes: string[];
  /** The running LB pods' addresses, sorted. */
  pods: string[];
}

/** `kubeconfig`: its text, or the path of its file (as the Kubernetes provider takes it; the lab's). */
export async function lbPods(kubeconfig: string): Promise<LbPods> {
  const kc = new KubeConfig();
  if (!kubeconfig.includes("\n") && existsSync(kubeconfig)) kc.loadFromFile(kubeconfig);
  else kc.loadFromString(kubeconfig);
  const list = await kc
    .makeApiClient(CoreV1Api)
    .listPodForAllNamespaces({ labelSelector: `app=${LB_APP_LABEL}` });
  const running = list.items.filter((p) => p.status?.phase === "Running");
  const sorted = (ips: (string | undefined)[]) =>
    [...new Set(ips.filter((ip): ip is string => ip !== undefined))].sort();
  return {
    nodes: sorted(running.map((p) => p.status?.hostIP)),
    pods: sorted(running.map((p) => p.status?.podIP)),
  };
}
