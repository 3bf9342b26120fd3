// The cluster's own VPC network and its one regional subnetwork (network.nodeCidr). Named, not
// auto-named: cloud-routes mode writes VIP routes into it by name, known at preview.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import { gcpNetworkName } from "../gcpEnvironment.ts";

export interface GcpNetworkArgs {
  clusterName: string;
  region: string;
  cidr: string;
}

export class GcpNetwork extends pulumi.ComponentResource {
  public readonly networkName: string;
  public readonly networkId: pulumi.Output<string>;
  public readonly subnetworkId: pulumi.Output<string>;

  constructor(name: string, args: GcpNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:GcpNetwork", name, {}, opts);
    const child = { parent: this };
    this.networkName = gcpNetworkName(args.clusterName);
    const network = new gcp.compute.Network(
      `${name}-network`,
      {
        name: this.networkName,
        autoCreateSubnetworks: false,
        routingMode: "REGIONAL",
        description: `portable-lb ${args.clusterName}`,
      },
      child,
    );
    const subnetwork = new gcp.compute.Subnetwork(
      `${name}-nodes`,
      { network: network.id, region: args.region, ipCidrRange: args.cidr },
      child,
    );
    this.networkId = network.id;
    this.subnetworkId = subnetwork.id;
    this.registerOutputs({ networkId: this.networkId, subnetworkId: this.subnetworkId });
  }
}
