// An `aws` environment made real: the cluster's credentials, its VPC, firewall and (cloud-routes)
// the LB nodes' role, then one EC2 instance per planned machine booting the shared bootstrap script
// from cloud-init. The control plane's public address is an Elastic IP on its network interface,
// there from first boot, so the API certificate and the kubeconfig name it before anything runs.
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { awsPlan, type AwsEnvironmentConfig } from "../awsEnvironment.ts";
import { API_SERVER_PORT } from "../bootstrap/bootstrapScript.ts";
import { renderCloudInit } from "../bootstrap/cloudInit.ts";
import { ClusterCredentials, clusterBootstrap } from "../bootstrap/clusterCredentials.ts";
import {
  cloudEnvironment,
  type ClusterNetworks,
  type NodeFact,
  type ProvisionedEnvironment,
} from "../provider.ts";
import { bootOnceOptions } from "../machineLifecycle.ts";
import { AwsNetwork } from "./awsNetwork.ts";
import { AwsSecurityGroups } from "./awsSecurityGroups.ts";
import { LbNodeRole } from "./lbNodeRole.ts";

/** Debian's own account for its official AMIs. */
export const DEBIAN_AMI_OWNER = "136693071363";
export const DEBIAN_AMI_NAME = "debian-12-amd64-*";
const ROOT_VOLUME_GB = 20;

export interface AwsClusterArgs {
  environment: AwsEnvironmentConfig;
  /** The cluster's networks (network.nodeCidr is the VPC's range; the pod and service CIDRs go to kubeadm). */
  network: ClusterNetworks;
}

export class AwsCluster extends pulumi.ComponentResource {
  /** What PortableCluster takes. */
  public readonly environment: ProvisionedEnvironment;
  public readonly credentials: ClusterCredentials;
  public readonly network: AwsNetwork;
  public readonly securityGroups: AwsSecurityGroups;
  /** cloud-routes mode (no BGP peers). */
  public readonly lbNodeRole?: LbNodeRole;
  public readonly instances: Record<string, aws.ec2.Instance>;
  /** The API server's public address. */
  public readonly apiAddress: pulumi.Output<string>;

  constructor(name: string, args: AwsClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    const env = args.environment;
    // The plan is checked before anything registers (a ConfigError naming the field).
    const plan = awsPlan(env, args.network.nodeCidr);
    super("portable-lb:providers:AwsCluster", name, {}, opts);
    const provider = new aws.Provider(`${name}-aws`, { region: env.region as aws.Region }, { parent: this });
    const child = { parent: this, provider };
    const cloudRoutes = !env.bgp;

    this.credentials = new ClusterCredentials(
      `${name}-credentials`,
      { clusterName: env.name },
      { parent: this },
    );
    this.network = new AwsNetwork(
      `${name}-network`,
      { clusterName: env.name, cidr: args.network.nodeCidr, subnets: plan.subnets },
      child,
    );
    this.securityGroups = new AwsSecurityGroups(
      `${name}-firewall`,
      {
        clusterName: env.name,
        vpcId: this.network.vpcId,
        apiAccessCidrs: env.apiAccessCidrs,
        vipPorts: env.vipPorts,
        vipAccessCidrs: env.vipAccessCidrs,
        ...(args.network.flannelVxlanPort !== undefined && {
          flannelVxlanPort: args.network.flannelVxlanPort,
        }),
        ...(env.bgp && { routers: env.bgp.routers }),
      },
      child,
    );
    const routeTableIds = this.network.routeTableId.apply((id) => [id]);
    if (cloudRoutes) {
      const identity = aws.getCallerIdentityOutput({}, child);
      this.lbNodeRole = new LbNodeRole(
        `${name}-lb-role`,
        { clusterName: env.name, region: env.region, accountId: identity.accountId, routeTableIds },
        child,
      );
    }
    const ami =
      env.ami ??
      aws.ec2.getAmiOutput(
        {
          mostRecent: true,
          owners: [DEBIAN_AMI_OWNER],
          filters: [
            { name: "name", values: [DEBIAN_AMI_NAME] },
            { name: "architecture", values: ["x86_64"] },
          ],
        },
        child,
      ).id;

    const controlPlane = plan.nodes.find((n) => n.role === "control-plane")!;
    const sgs = this.securityGroups;
    const cpInterface = new aws.ec2.NetworkInterface(
      `${name}-${controlPlane.name}`,
      {
        subnetId: this.network.subnetIds[controlPlane.zone!]!,
        privateIps: [controlPlane.address],
        securityGroups: [sgs.nodes.id, sgs.controlPlane.id],
        tags: { Name: controlPlane.name, "portable-lb.io/cluster": env.name },
      },
      child,
    );
    const apiIp = new aws.ec2.Eip(
      `${name}-api`,
      {
        domain: "vpc",
        networkInterface: cpInterface.id,
        associateWithPrivateIp: controlPlane.address,
        tags: { Name: `${env.name}-api`, "portable-lb.io/cluster": env.name },
      },
      child,
    );
    this.apiAddress = apiIp.publicIp;

    const cluster = clusterBootstrap({
      nodes: plan.nodes,
      network: args.network,
      lbTaint: env.lbTaint,
      apiAddress: this.apiAddress,
    });
    // The instance ID is known only on the machine: the script asks the metadata service.
    const userData = (node: NodeFact) =>
      this.credentials.bootstrapScript(cluster, node, { from: "aws-metadata" }).apply(renderCloudInit);

    this.instances = {};
    for (const node of plan.nodes) {
      const lb = node.role === "lb";
      const placement =
        node.role === "control-plane"
          ? { primaryNetworkInterface: { networkInterfaceId: cpInterface.id } }
          : {
              subnetId: this.network.subnetIds[node.zone!]!,
              privateIp: node.address,
              associatePublicIpAddress: true,
              vpcSecurityGroupIds: [sgs.nodes.id, ...(lb ? [sgs.lbNodes.id] : [])],
              // LB nodes forward VIP traffic, addressed to neither them nor their pods.
              sourceDestCheck: !lb,
            };
      this.instances[node.name] = new aws.ec2.Instance(
        `${name}-${node.name}`,
        {
          ami,
          instanceType: env.instanceType,
          ...placement,
          ...(lb && this.lbNodeRole && { iamInstanceProfile: this.lbNodeRole.instanceProfileName }),
          // Run once, at first boot (machineLifecycle.ts).
          userData: userData(node),
          // IMDSv2 only. LB pods reach it one hop further (their credentials, cloud-routes); no one else.
          metadataOptions: {
            httpEndpoint: "enabled",
            httpTokens: "required",
            httpPutResponseHopLimit: lb ? 2 : 1,
          },
          rootBlockDevice: { volumeSize: ROOT_VOLUME_GB, volumeType: "gp3", encrypted: true },
          tags: { Name: node.name, "portable-lb.io/cluster": env.name, "portable-lb.io/role": node.role },
        },
        {
          ...child,
          ...bootOnceOptions("userData"),
          ...(node.role === "control-plane" && { dependsOn: [apiIp] }),
        },
      );
    }

    const server = pulumi.interpolate`https://${this.apiAddress}:${API_SERVER_PORT}`;
    this.environment = cloudEnvironment({
      name,
      parent: this,
      plan,
      kubeconfig: this.credentials.kubeconfig(server),
      cloudRoutes: { cloud: "aws", routeTableIds },
      machines: Object.values(this.instances),
    });
    this.registerOutputs({ apiAddress: this.apiAddress, kubeconfig: this.environment.kubeconfig });
  }
}
