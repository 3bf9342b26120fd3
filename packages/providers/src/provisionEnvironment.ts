// The one path from a checked `environment` of a provisioning kind to the cluster PortableCluster
// takes: each kind's component (AwsCluster, GcpCluster) makes the machines and hands back its
// ProvisionedEnvironment. A kind plugs in here with its component; the root program needs no change.
import { ConfigError, problem } from "@portable-lb/core";
import type * as pulumi from "@pulumi/pulumi";
import { AwsCluster } from "./aws/awsCluster.ts";
import type { ProvisioningEnvironmentConfig } from "./environment.ts";
import { GcpCluster } from "./gcp/gcpCluster.ts";
import type { ProvisionedEnvironment } from "./provider.ts";

/** The networks a provisioned cluster is made on (network.nodeCidr is where its machines go). */
export interface ClusterNetworks {
  nodeCidr: string;
  podCidr: string;
  serviceCidr: string;
}

type Kind = ProvisioningEnvironmentConfig["kind"];

/** A component that provisions one kind's cluster from that kind's config. */
export type ClusterProvisioner<K extends Kind> = new (
  name: string,
  args: { environment: Extract<ProvisioningEnvironmentConfig, { kind: K }>; network: ClusterNetworks },
  opts?: pulumi.ComponentResourceOptions,
) => { environment: ProvisionedEnvironment };

/** Each provisioning kind's component; onprem's (SSH) comes with its own issue. */
export const PROVISIONERS: { [K in Kind]?: ClusterProvisioner<K> } = { aws: AwsCluster, gcp: GcpCluster };

/**
 * Provisions the environment's cluster, named for `environment.name`; throws a ConfigError (before
 * anything registers) for a kind without a component yet.
 */
export function provisionEnvironment(
  environment: ProvisioningEnvironmentConfig,
  network: ClusterNetworks,
  opts?: pulumi.ComponentResourceOptions,
): ProvisionedEnvironment {
  const Provisioner = PROVISIONERS[environment.kind] as ClusterProvisioner<Kind> | undefined;
  if (!Provisioner) {
    const kinds = Object.keys(PROVISIONERS).map((k) => `"${k}"`);
    throw new ConfigError(
      problem(
        "environment.kind",
        `${environment.kind} clusters cannot be provisioned yet; use ${kinds.join(" or ")}, or "kubeconfig" with a cluster you have`,
        environment.kind,
      ),
    );
  }
  const { nodeCidr, podCidr, serviceCidr } = network;
  return new Provisioner(environment.name, { environment, network: { nodeCidr, podCidr, serviceCidr } }, opts)
    .environment;
}
