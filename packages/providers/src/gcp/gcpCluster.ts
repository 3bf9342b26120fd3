// A `gcp` environment made real: the cluster's credentials, its VPC network, firewall rules and the
// machines' service accounts, then one Compute Engine instance per planned machine running the
// shared bootstrap script as its startup script. The control plane's external address is reserved
// first, so the API certificate and the kubeconfig name it before anything runs.
import * as gcp from "@pulumi/gcp";
import * as pulumi from "@pulumi/pulumi";
import { API_SERVER_PORT } from "../bootstrap/bootstrapScript.ts";
import { ClusterCredentials, clusterBootstrap } from "../bootstrap/clusterCredentials.ts";
import { gcpPlan, type GcpEnvironmentConfig } from "../gcpEnvironment.ts";
import {
  cloudEnvironment,
  type ClusterNetworks,
  type NodeFact,
  type ProvisionedEnvironment,
} from "../provider.ts";
import { bootOnceOptions } from "../machineLifecycle.ts";
import { GcpFirewall, gcpNodeTags } from "./gcpFirewall.ts";
import { GcpNetwork } from "./gcpNetwork.ts";
import { GcpNodeIdentity } from "./gcpNodeIdentity.ts";

const BOOT_DISK_GB = 20;

export interface GcpClusterArgs {
  environment: GcpEnvironmentConfig;
  /** network.nodeCidr is the subnetwork's range; the pod and service CIDRs go to kubeadm. */
  network: ClusterNetworks;
}

export class GcpCluster extends pulumi.ComponentResource {
  public readonly environment: ProvisionedEnvironment;
  public readonly credentials: ClusterCredentials;
  public readonly network: GcpNetwork;
  public readonly firewall: GcpFirewall;
  public readonly identity: GcpNodeIdentity;
  public readonly instances: Record<string, gcp.compute.Instance>;
  public readonly apiAddress: pulumi.Output<string>;

  constructor(name: string, args: GcpClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    const env = args.environment;
    const plan = gcpPlan(env, args.network.nodeCidr);
    super("portable-lb:providers:GcpCluster", name, {}, opts);
    const provider = new gcp.Provider(
      `${name}-gcp`,
      { project: env.project, region: env.region },
      { parent: this },
    );
    const child = { parent: this, provider };
    const cloudRoutes = !env.bgp;
    const tags = gcpNodeTags(env.name);

    this.credentials = new ClusterCredentials(
      `${name}-credentials`,
      { clusterName: env.name },
      { parent: this },
    );
    this.network = new GcpNetwork(
      `${name}-network`,
      { clusterName: env.name, region: env.region, cidr: args.network.nodeCidr },
      child,
    );
    this.firewall = new GcpFirewall(
      `${name}-firewall`,
      {
        clusterName: env.name,
        networkId: this.network.networkId,
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
    this.identity = new GcpNodeIdentity(
      `${name}-identity`,
      { clusterName: env.name, project: env.project, cloudRoutes },
      child,
    );
    const apiIp = new gcp.compute.Address(
      `${name}-api`,
      { region: env.region, addressType: "EXTERNAL", description: `portable-lb ${env.name}: the API server` },
      child,
    );
    this.apiAddress = apiIp.address;

    const cluster = clusterBootstrap({
      nodes: plan.nodes,
      network: args.network,
      lbTaint: env.lbTaint,
      apiAddress: this.apiAddress,
    });
    const startupScript = (node: NodeFact) =>
      this.credentials.bootstrapScript(cluster, node, {
        from: "value",
        value: `gce://${env.project}/${node.zone}/${node.name}`,
      });

    this.instances = {};
    for (const node of plan.nodes) {
      const lb = node.role === "lb";
      const cp = node.role === "control-plane";
      this.instances[node.name] = new gcp.compute.Instance(
        `${name}-${node.name}`,
        {
          // The kubelet's providerID names the instance: gce://PROJECT/ZONE/NAME.
          name: node.name,
          zone: node.zone!,
          machineType: env.machineType,
          bootDisk: { initializeParams: { image: env.image, size: BOOT_DISK_GB, type: "pd-balanced" } },
          networkInterfaces: [
            {
              subnetwork: this.network.subnetworkId,
              networkIp: node.address,
              // A public address to reach package repositories (no Cloud NAT's hourly cost).
              accessConfigs: [cp ? { natIp: this.apiAddress } : {}],
            },
          ],
          // LB nodes forward VIP traffic, addressed to neither them nor their pods.
          canIpForward: lb,
          tags: [tags.nodes, ...(cp ? [tags.controlPlane] : []), ...(lb ? [tags.lbNodes] : [])],
          labels: { "portable-lb-cluster": env.name, "portable-lb-role": node.role },
          serviceAccount: {
            email: lb ? this.identity.lbNodesEmail : this.identity.nodesEmail,
            scopes: ["cloud-platform"],
          },
          shieldedInstanceConfig: {
            enableSecureBoot: true,
            enableVtpm: true,
            enableIntegrityMonitoring: true,
          },
          // Run once: it stops at once on a machine that has joined (machineLifecycle.ts).
          metadataStartupScript: startupScript(node),
          metadata: { "block-project-ssh-keys": "true" },
        },
        { ...child, ...bootOnceOptions("metadataStartupScript") },
      );
    }

    const server = pulumi.interpolate`https://${this.apiAddress}:${API_SERVER_PORT}`;
    this.environment = cloudEnvironment({
      name,
      parent: this,
      plan,
      kubeconfig: this.credentials.kubeconfig(server),
      cloudRoutes: { cloud: "gcp", project: env.project, network: this.network.networkName },
      machines: Object.values(this.instances),
    });
    this.registerOutputs({ apiAddress: this.apiAddress, kubeconfig: this.environment.kubeconfig });
  }
}
