// The cluster's firewall rules, by network tag: the cluster's ports among its machines, BGP and BFD
// from the routers (BGP mode), the API from the listed ranges to the control plane, and the VIP
// ports from the VIPs' clients to the LB nodes. Nothing else comes in (GCP denies ingress by default).
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import {
  API_PORT_RANGE,
  clusterPorts,
  ROUTER_PORTS,
  vipPortRanges,
  type ClusterAccess,
  type PortRange,
} from "../clusterPorts.ts";

/** The network tags the rules select machines by. */
export function gcpNodeTags(clusterName: string) {
  return {
    nodes: `${clusterName}-node`,
    controlPlane: `${clusterName}-control-plane`,
    lbNodes: `${clusterName}-lb`,
  };
}

export interface GcpFirewallArgs extends ClusterAccess {
  networkId: pulumi.Input<string>;
}

/** GCP's `allows`: one entry per protocol, its ports as "N" or "N-M". */
function allows(ranges: readonly PortRange[]) {
  return (["tcp", "udp"] as const).flatMap((protocol) => {
    const ports = ranges
      .filter((r) => r.protocol === protocol)
      .map((r) => (r.from === r.to ? `${r.from}` : `${r.from}-${r.to}`));
    return ports.length ? [{ protocol, ports }] : [];
  });
}

export class GcpFirewall extends pulumi.ComponentResource {
  constructor(name: string, args: GcpFirewallArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:GcpFirewall", name, {}, opts);
    const tags = gcpNodeTags(args.clusterName);
    const rule = (
      suffix: string,
      ranges: readonly PortRange[],
      from: { sourceRanges: string[] } | { sourceTags: string[] },
      target: string,
    ) =>
      new gcp.compute.Firewall(
        `${name}-${suffix}`,
        {
          network: args.networkId,
          direction: "INGRESS",
          description: `portable-lb ${args.clusterName}: ${[...new Set(ranges.map((r) => r.why))].join(", ")}`,
          allows: allows(ranges),
          ...from,
          targetTags: [target],
        },
        { parent: this },
      );
    rule("internal", clusterPorts(args.flannelVxlanPort), { sourceTags: [tags.nodes] }, tags.nodes);
    if (args.routers?.length)
      rule("routers", ROUTER_PORTS, { sourceRanges: args.routers.map((r) => `${r}/32`) }, tags.nodes);
    rule("api", [API_PORT_RANGE], { sourceRanges: [...args.apiAccessCidrs] }, tags.controlPlane);
    rule("vips", vipPortRanges(args.vipPorts), { sourceRanges: [...args.vipAccessCidrs] }, tags.lbNodes);
    this.registerOutputs({});
  }
}
