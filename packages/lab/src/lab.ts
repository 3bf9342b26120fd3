// The `lab` environment: the ECMP paper's Fig. 5 on this machine, as Pulumi resources. It makes the
// node network, the control plane and the nodes (real kubelets), and hands PortableCluster an
// environment like any other: a kubeconfig, BGP peering with the lab's router, the LB node count and
// where the route reflectors go. The router itself comes last (`router()`), configured with what
// PortableCluster renders for an upstream router.
import {
  networkPlanSchema,
  parseOrThrow,
  type ClusterEnvironment,
  type NetworkPlanInput,
} from "@portable-lb/core";
import * as pulumi from "@pulumi/pulumi";
import { builtLbImage } from "./builtLbImage.ts";
import { ClusterDns } from "./clusterDns.ts";
import { labImage, labNodeImages } from "./node/labImages.ts";
import { labPlan, type LabEnvironmentConfig, type LabPlan } from "./labPlan.ts";
import { LabResource } from "./labResource.ts";
import type { ControlPlaneState } from "./ops/controlPlane.ts";
import type { NetworkState } from "./ops/network.ts";
import type { NodeState } from "./ops/node.ts";
import type { RouterState } from "./ops/router.ts";

export interface LabArgs {
  environment: LabEnvironmentConfig;
  network: NetworkPlanInput;
}

export class Lab extends pulumi.ComponentResource {
  public readonly plan: LabPlan;
  /**
   * This machine's admin kubeconfig, as a file path (the Kubernetes provider and kubectl take
   * either), so its keys stay on this machine and out of Pulumi's state.
   */
  public readonly kubeconfig: pulumi.Output<string>;
  public readonly environment: ClusterEnvironment;
  /** The route reflectors' nodes and addresses, for PortableCluster's `loadBalancer.routeReflectors`. */
  public readonly routeReflectors: { node: string; address: string }[];
  private readonly network: LabResource<NetworkState>;

  constructor(name: string, args: LabArgs, opts?: pulumi.ComponentResourceOptions) {
    // The type keeps the package it was born in: a new one would change the URNs of existing lab stacks.
    super("portable-lb:providers:Lab", name, {}, opts);
    const plan = labPlan(args.environment, parseOrThrow(networkPlanSchema, args.network, "network"));
    this.plan = plan;
    this.routeReflectors = plan.reflectors;
    const child = { parent: this };

    this.network = new LabResource<NetworkState>("Network", `${name}-network`, "network", { plan }, child);
    const controlPlane = new LabResource<ControlPlaneState>(
      "ControlPlane",
      `${name}-control-plane`,
      "controlPlane",
      { plan, network: this.network.state.instance },
      child,
    );
    const nodes = plan.nodes.map(
      (node) =>
        new LabResource<NodeState>(
          "Node",
          `${name}-${node.name}`,
          "node",
          {
            plan,
            node: node.name,
            controlPlane: controlPlane.state.instance,
            adminKubeconfig: controlPlane.state.kubeconfigFile,
            images: labNodeImages().map((i) => i.archive),
          },
          child,
        ),
    );
    // The cluster's objects wait for the nodes and go before them (environment.dependsOn), so the
    // kubelets are still there to stop the pods. A dependency, not an input: a node rebuilt alone
    // leaves the kubeconfig, and so everything deployed with it, as it is.
    this.kubeconfig = controlPlane.state.kubeconfigFile;
    this.environment = {
      kind: "lab",
      platform: "lab",
      kubeconfig: this.kubeconfig,
      // One router for every platform of the site: its id is the site's, the names in its config each
      // platform's own.
      bgp: { routers: [plan.router.ip], routerId: plan.router.routerId, platformName: plan.name },
      lbNodeCount: args.environment.lbNodes,
      dependsOn: nodes,
      lbImage: builtLbImage().ref,
      flannelImage: labImage("flannel").ref,
      // The lab's cluster has no other load balancer: ours is its default.
      servesClasslessByDefault: true,
      // A lab whose machine crashed has no cluster to delete objects from until its next up.
      deleteUnreachable: true,
      // Healing the control plane rewrites its outputs, so its kubeconfig is unknown at preview.
      clusterIdentifier: `lab/${plan.name}`,
    };
    this.registerOutputs({ kubeconfig: this.kubeconfig });
  }

  /** The cluster's DNS (kubeadm's CoreDNS), deployed through the cluster's `provider`. */
  clusterDns(opts: pulumi.ComponentResourceOptions): ClusterDns {
    return new ClusterDns(
      `${this.plan.name}-dns`,
      { clusterIp: this.plan.clusterDns },
      { parent: this, ...opts },
    );
  }

  /** Starts the lab's upstream router with `config` (PortableCluster's `routerConfig`). */
  router(config: pulumi.Input<string>, opts?: pulumi.CustomResourceOptions): LabResource<RouterState> {
    return new LabResource<RouterState>(
      "Router",
      `${this.plan.name}-router`,
      "router",
      { plan: this.plan, config, network: this.network.state.instance },
      { parent: this, ...opts },
    );
  }
}
