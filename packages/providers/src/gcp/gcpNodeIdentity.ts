// The machines' GCP identities, never the default compute service account (Editor on the project):
// one service account with no role for every machine, and in cloud-routes mode one for the LB nodes
// bound to core's custom role (the route calls only). Routes are project resources: the binding is
// on the project, with nothing else in the role.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { gcpCloudRoutesRole } from "@portable-lb/core";

export interface GcpNodeIdentityArgs {
  clusterName: string;
  project: string;
  /** cloud-routes mode: give the LB nodes the route permissions. */
  cloudRoutes: boolean;
}

export class GcpNodeIdentity extends pulumi.ComponentResource {
  /** For every machine but the LB nodes in cloud-routes mode. */
  public readonly nodesEmail: pulumi.Output<string>;
  public readonly lbNodesEmail: pulumi.Output<string>;

  constructor(name: string, args: GcpNodeIdentityArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:GcpNodeIdentity", name, {}, opts);
    const child = { parent: this };
    const account = (suffix: string, what: string) =>
      new gcp.serviceaccount.Account(
        `${name}-${suffix}`,
        {
          accountId: `${args.clusterName}-${suffix}`,
          displayName: `portable-lb ${args.clusterName}: ${what}`,
        },
        child,
      );
    const nodes = account("nodes", "cluster machines (no roles)");
    this.nodesEmail = nodes.email;
    this.lbNodesEmail = nodes.email;
    if (args.cloudRoutes) {
      const lb = account("lb-nodes", "LB nodes (VIP routes)");
      // Custom role ids allow letters, digits, '_' and '.'; one per cluster in a project. A deleted
      // role can be undeleted for 7 days (the provider does so on create), but its id is then taken
      // until day 37: a suffix kept in state lets a destroyed cluster be made again meanwhile.
      const suffix = new random.RandomId(`${name}-cloud-routes-role`, { byteLength: 4 }, child);
      const roleId = pulumi.interpolate`portableLb.${args.clusterName.replaceAll("-", "_")}.cloudRoutes_${suffix.hex}`;
      const role = new gcp.projects.IAMCustomRole(
        `${name}-cloud-routes`,
        { ...gcpCloudRoutesRole({ project: args.project }), roleId },
        child,
      );
      new gcp.projects.IAMMember(
        `${name}-cloud-routes`,
        { project: args.project, role: role.name, member: pulumi.interpolate`serviceAccount:${lb.email}` },
        child,
      );
      this.lbNodesEmail = lb.email;
    }
    this.registerOutputs({ nodesEmail: this.nodesEmail, lbNodesEmail: this.lbNodesEmail });
  }
}
