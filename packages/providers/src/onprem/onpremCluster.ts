// An `onprem` environment made real: machines that exist already, reached over SSH with
// @pulumi/command. Each gets the shared bootstrap script copied to it (root-only, where cloud-init
// puts it in the clouds) and run: the control plane first, then every other node joins it. The
// cluster's credentials are Pulumi's (ClusterCredentials), so the kubeconfig is known without SSH.
import { posix } from "node:path";
import { remote, type types } from "@pulumi/command";
import * as pulumi from "@pulumi/pulumi";
import { API_SERVER_PORT } from "../bootstrap/bootstrapScript.ts";
import { BOOTSTRAP_SCRIPT_PATH } from "../bootstrap/cloudInit.ts";
import { ClusterCredentials, clusterBootstrap } from "../bootstrap/clusterCredentials.ts";
import { onpremPlan, type OnpremEnvironmentConfig } from "../onpremEnvironment.ts";
import { lbNodesOf, planRouting, type ProvisionedEnvironment } from "../provider.ts";

export interface OnpremClusterArgs {
  environment: OnpremEnvironmentConfig;
  /** network.nodeCidr holds the machines' addresses; the pod and service CIDRs go to kubeadm. */
  network: { nodeCidr: string; podCidr: string; serviceCidr: string };
  /** The SSH private key (PEM or OpenSSH) that logs in to every machine as environment.ssh.user. */
  privateKey: pulumi.Input<string>;
}

/** What copies the script (read from stdin) to where cloud-init keeps it: a root-only file. */
export const COPY_SCRIPT = `install -d -m 0700 ${posix.dirname(BOOTSTRAP_SCRIPT_PATH)} && install -m 0700 /dev/stdin ${BOOTSTRAP_SCRIPT_PATH}`;
/** What runs it: the script is safe to run again (a node that joined stops at its first check). */
export const RUN_SCRIPT = `bash ${BOOTSTRAP_SCRIPT_PATH}`;

export class OnpremCluster extends pulumi.ComponentResource {
  /** What PortableCluster takes. */
  public readonly environment: ProvisionedEnvironment;
  public readonly credentials: ClusterCredentials;
  /** Per node name: the command that copies its script, and the one that runs it. */
  public readonly copies: Record<string, remote.Command>;
  public readonly bootstraps: Record<string, remote.Command>;

  constructor(name: string, args: OnpremClusterArgs, opts?: pulumi.ComponentResourceOptions) {
    const env = args.environment;
    // The plan is checked before anything registers (a ConfigError naming the field).
    const plan = onpremPlan(env, args.network.nodeCidr);
    super("portable-lb:providers:OnpremCluster", name, {}, opts);
    const child = { parent: this };

    this.credentials = new ClusterCredentials(`${name}-credentials`, { clusterName: env.name }, child);
    const controlPlane = plan.nodes.find((n) => n.role === "control-plane")!;
    // Where kubectl and pulumi reach the API server: the control plane's address on the node network.
    const cluster = clusterBootstrap({
      nodes: plan.nodes,
      network: args.network,
      lbTaint: env.lbTaint,
      apiAddress: controlPlane.address,
      machines: env.machines,
    });
    const privateKey = pulumi.secret(args.privateKey);

    this.copies = {};
    this.bootstraps = {};
    const bootstrap = (node: (typeof plan.nodes)[number], after: pulumi.Resource[]) => {
      const machine = env.nodes.find((n) => n.name === node.name)!;
      const connection: types.input.remote.ConnectionArgs = {
        host: machine.host,
        port: env.ssh.port,
        user: env.ssh.user,
        privateKey,
        ...(machine.hostKey && { hostKey: machine.hostKey }),
      };
      const script = this.credentials.bootstrapScript(cluster, node);
      const copy = new remote.Command(
        `${name}-${node.name}-copy`,
        // A new script is copied again (and run again below).
        { connection, create: COPY_SCRIPT, stdin: script, triggers: [script] },
        child,
      );
      this.copies[node.name] = copy;
      this.bootstraps[node.name] = new remote.Command(
        `${name}-${node.name}-bootstrap`,
        { connection, create: RUN_SCRIPT, triggers: [script] },
        { ...child, dependsOn: [copy, ...after] },
      );
    };
    bootstrap(controlPlane, []);
    // Joins need the control plane's API server and the bootstrap token it created.
    const initialized = this.bootstraps[controlPlane.name]!;
    for (const node of plan.nodes.filter((n) => n !== controlPlane)) bootstrap(node, [initialized]);

    const server = `https://${controlPlane.address}:${API_SERVER_PORT}`;
    this.environment = {
      kind: "onprem",
      platform: "onprem",
      kubeconfig: this.credentials.kubeconfig(server),
      nodes: plan.nodes,
      lbNodeCount: lbNodesOf(plan.nodes).length,
      ...planRouting(plan),
      // Nodes we bootstrap on the user's own network: connections survive LB changes (issue 16).
      defaultForwarding: "dsr",
      // A cluster we bootstrapped runs no other load balancer: ours is its default.
      servesClasslessByDefault: true,
      // The cluster's objects wait for every node to have joined.
      dependsOn: Object.values(this.bootstraps),
    };
    this.registerOutputs({ kubeconfig: this.environment.kubeconfig });
  }
}
