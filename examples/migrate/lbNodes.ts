// The LB node addresses of a platform, as its router knows them (its ECMP next hops): the nodes its
// LB pods run on, read from the platform's cluster through the kubeconfig its stack hands out. A
// migration by BGP hands these to the other platform (a handover's relay target, and whose relayed
// flows to take), so nothing is typed by hand and a rescheduled LB pod is seen at the next run.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { LB_APP_LABEL } from "@portable-lb/core/config";

export async function lbNodeAddresses(kubeconfig: string): Promise<string[]> {
  const kc = new KubeConfig();
  kc.loadFromString(kubeconfig);
  const pods = await kc
    .makeApiClient(CoreV1Api)
    .listPodForAllNamespaces({ labelSelector: `app=${LB_APP_LABEL}` });
  const ips = pods.items.flatMap((p) =>
    p.status?.phase === "Running" && p.status.hostIP ? [p.status.hostIP] : [],
  );
  return [...new Set(ips)].sort();
}
