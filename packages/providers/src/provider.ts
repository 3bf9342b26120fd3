// The one interface every provisioning environment (onprem, aws, gcp) offers PortableCluster: the
// machines it made, the cluster's kubeconfig (a secret, known without SSH), and the network facts the
// LB needs. The node facts are planned before anything exists, so the checks at preview see them.
import type {
  ClusterEnvironment,
  EnvironmentRouteTargets,
  Platform,
  RouteTargetFacts,
} from "@portable-lb/core";
import type * as pulumi from "@pulumi/pulumi";
import { ApiServerReady } from "./apiServer/apiServerReady.ts";

export const NODE_ROLES = ["control-plane", "lb", "worker"] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

/** One machine of the cluster, as planned: its Kubernetes node name and its address on the node network. */
export interface NodeFact {
  name: string;
  role: NodeRole;
  address: string;
  /** The cloud zone it runs in (aws, gcp). */
  zone?: string;
}

/** The networks a provisioned cluster is made on (network.nodeCidr is where its machines go). */
export interface ClusterNetworks {
  nodeCidr: string;
  podCidr: string;
  serviceCidr: string;
  /** flannel.vxlan.port, when the cluster's flannel does not use 8472 (the clouds' firewalls open it). */
  flannelVxlanPort?: number;
}

/** What a provisioning environment is known to be at preview, before any machine exists. */
export interface EnvironmentPlan {
  platform: Platform;
  nodes: NodeFact[];
  /** The upstream routers the route reflectors peer with, when the network offers BGP. */
  bgp?: { routers: string[] };
  /** Without BGP peers, in a cloud: where the cloud-routes mode will write (AWS ids come later). */
  cloudRoutes?: RouteTargetFacts;
}

/** A provisioned environment: what PortableCluster takes, plus the machines and the cloud's routes. */
export interface ProvisionedEnvironment extends ClusterEnvironment {
  kubeconfig: pulumi.Output<string>;
  nodes: NodeFact[];
  lbNodeCount: number;
}

/** The LB nodes of a plan: they carry the LB label and run one LB pod each. */
export function lbNodesOf(nodes: readonly NodeFact[]): NodeFact[] {
  return nodes.filter((n) => n.role === "lb");
}

/** Why DSR's replies cannot leave the backends' nodes of a cloud cluster we make (awsCluster, gcpCluster). */
export const CLOUD_DSR_BLOCKED: Record<"aws" | "gcp", string> = {
  aws: "the aws environment's machines but the LB nodes keep EC2's source/destination check, which drops the replies a backend's node sends from the VIP",
  gcp: "the gcp environment's machines but the LB nodes have canIpForward off, so GCP drops the replies a backend's node sends from the VIP",
};

/**
 * Where the route reflectors run unless the user says: the first two workers, which the clouds' plans
 * put in different zones. Never an LB node, whose loss would take a reflector and an LB pod together,
 * nor the control plane, tainted against such pods. None without workers (the user then names them).
 */
export function defaultRouteReflectors(nodes: readonly NodeFact[]): { node: string; address: string }[] {
  return nodes
    .filter((n) => n.role === "worker")
    .slice(0, 2)
    .map((n) => ({ node: n.name, address: n.address }));
}

/**
 * What a plan tells PortableCluster of its routing: the BGP peers and the nodes the reflectors run on
 * by default, and (our cloud machines) why DSR's replies would be dropped. The same at preview
 * (planFacts) and once the machines are made.
 */
export function planRouting(
  plan: EnvironmentPlan,
): Pick<ClusterEnvironment, "bgp" | "defaultRouteReflectors" | "vipSourcedRepliesDropped"> {
  return {
    ...(plan.bgp && { bgp: plan.bgp, defaultRouteReflectors: defaultRouteReflectors(plan.nodes) }),
    ...((plan.platform === "aws" || plan.platform === "gcp") && {
      vipSourcedRepliesDropped: CLOUD_DSR_BLOCKED[plan.platform],
    }),
  };
}

/**
 * A cloud cluster as PortableCluster takes it: BGP where peers are given, else the cloud's routes;
 * its objects wait for the API server to be ready on the machines, and are deleted before them.
 */
export function cloudEnvironment(o: {
  /** The cluster component's name and the component itself: the wait is its child. */
  name: string;
  parent: pulumi.Resource;
  plan: EnvironmentPlan & { platform: "aws" | "gcp" };
  kubeconfig: pulumi.Output<string>;
  cloudRoutes: EnvironmentRouteTargets;
  machines: pulumi.CustomResource[];
}): ProvisionedEnvironment {
  const ready = new ApiServerReady(
    `${o.name}-api-ready`,
    { kubeconfig: o.kubeconfig, machines: o.machines.map((m) => m.id) },
    { parent: o.parent },
  );
  return {
    kind: o.plan.platform,
    platform: o.plan.platform,
    kubeconfig: o.kubeconfig,
    nodes: o.plan.nodes,
    lbNodeCount: lbNodesOf(o.plan.nodes).length,
    ...planRouting(o.plan),
    ...(!o.plan.bgp && { cloudRoutes: o.cloudRoutes }),
    // Machines we made run no other load balancer: ours is the cluster's default.
    servesClasslessByDefault: true,
    // The machines are the wait's inputs: it is created after them and deleted before them.
    dependsOn: [ready],
  };
}
