// What a cluster environment (one in @portable-lb/providers, or the lab) hands the components: where
// the cluster runs, how to reach it, and what routing it offers. Defined here so core needs no provider.
import type * as pulumi from "@pulumi/pulumi";
import type { Platform } from "./platform.ts";

/**
 * Where cloud-routes mode writes VIP routes, when the environment made that network itself: AWS route
 * tables (their ids known once created) or a GCP network. loadBalancer.cloudRoutes may leave them out.
 */
export type EnvironmentRouteTargets =
  | { cloud: "aws"; routeTableIds: pulumi.Input<string[]> }
  | { cloud: "gcp"; project: string; network: string };

/** What the checks at preview know of them: that AWS route tables will come, not yet their ids. */
export type RouteTargetFacts = { cloud: "aws" } | { cloud: "gcp"; project: string; network: string };

export interface ClusterEnvironment {
  /** The provider kind that produced it, e.g. "kubeconfig", "lab", "aws". */
  kind: string;
  platform: Platform;
  /** Admin kubeconfig of the cluster (a secret). */
  kubeconfig: pulumi.Input<string>;
  /**
   * BGP peering the environment offers: the upstream routers VIP routes are sent to; the router's
   * id when it is not the first router's address (the lab's router, one for several platforms); and
   * a name that sets this platform's peer group, BFD profile and route-map apart in the router's
   * config, where one router serves several platforms (their snippets pasted side by side).
   */
  bgp?: { routers: string[]; routerId?: string; platformName?: string };
  /** How many nodes carry the LB node label, when the environment knows (it created them). */
  lbNodeCount?: number;
  /** An LB image the environment itself provides (the lab's local build), when loadBalancer.image is not set. */
  lbImage?: string;
  /**
   * Resources the cluster's objects must wait for, and outlive on destroy (the lab's nodes). A
   * dependency, not an input: one of them replaced must not make the cluster's provider look new.
   */
  dependsOn?: pulumi.Resource[];
  /** Where its nodes' container runtime keeps pods' network namespaces, when not /run/netns (the lab's). */
  podNetnsDir?: string;
  /** cloud-routes mode: the route targets the environment made (the aws and gcp environments). */
  cloudRoutes?: EnvironmentRouteTargets;
  /** A flanneld image the environment itself provides (the lab's local build), for Flannel's DaemonSet. */
  flannelImage?: string;
  /**
   * How flows reach backends where loadBalancer.dataPlane.mode is unset and the routing is BGP:
   * environments that build their nodes themselves, on a network with no cloud gateway (onprem),
   * know that direct server return works there. Unset: SNAT, which works on any cluster.
   */
  defaultForwarding?: "dsr" | "snat";
  /**
   * Whether the LB serves LoadBalancer Services without a class where loadBalancer.serveClassless
   * is unset: an environment that made the cluster itself (the lab, onprem, aws, gcp) knows no
   * other load balancer runs there. Unset: only Services of our class, as on a cluster of unknown
   * make (an existing one may run a cloud's or another LB).
   */
  servesClasslessByDefault?: boolean;
  /**
   * Where the route reflectors run when loadBalancer.routeReflectors is unset and routing is BGP: an
   * environment that made the machines knows nodes that suit (provider.ts defaultRouteReflectors).
   */
  defaultRouteReflectors?: { node: string; address: string }[];
  /**
   * Why replies a backend's node sends from the VIP are dropped here, when the environment knows it
   * (cloud machines it made keep their anti-spoofing checks): dataPlane.mode dsr is refused with it.
   */
  vipSourcedRepliesDropped?: string;
  /**
   * Whether the Kubernetes provider may forget the cluster's objects when the cluster cannot be
   * reached on destroy: for an environment whose cluster goes with the stack (the lab's, which a
   * crashed machine leaves unreachable until the next up).
   */
  deleteUnreachable?: boolean;
  /**
   * A name that stays the cluster's whatever its kubeconfig becomes (the Kubernetes provider's
   * `clusterIdentifier`): without it, a kubeconfig not yet known at preview (one a provisioning
   * resource rewrites, as the lab's heal does after a crash) plans every object's replacement.
   */
  clusterIdentifier?: string;
}
