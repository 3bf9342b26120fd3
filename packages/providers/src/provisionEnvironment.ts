// The one path from a checked `environment` of a provisioning kind to the cluster PortableCluster
// takes: each kind's component (AwsCluster, GcpCluster, OnpremCluster) makes the machines and hands
// back its ProvisionedEnvironment. A kind plugs in here with its component; the root program needs
// no change.
import { ConfigError, problem } from "@portable-lb/core";
import type * as pulumi from "@pulumi/pulumi";
import { AwsCluster } from "./aws/awsCluster.ts";
import type { ProvisioningEnvironmentConfig } from "./environment.ts";
import { GcpCluster } from "./gcp/gcpCluster.ts";
import { OnpremCluster } from "./onprem/onpremCluster.ts";
import type { ClusterNetworks, ProvisionedEnvironment } from "./provider.ts";

export type { ClusterNetworks } from "./provider.ts";

/** What a kind needs besides its config, kept out of it because it is secret. */
export interface ProvisioningSecrets {
  /** onprem: the SSH private key that logs in to every machine (the stack's `sshPrivateKey`). */
  sshPrivateKey?: pulumi.Input<string>;
}

type Kind = ProvisioningEnvironmentConfig["kind"];

/** Makes one kind's cluster, named `name`, from that kind's config. */
export type ClusterProvisioner<K extends Kind> = (
  name: string,
  args: {
    environment: Extract<ProvisioningEnvironmentConfig, { kind: K }>;
    network: ClusterNetworks;
    secrets: ProvisioningSecrets;
  },
  opts?: pulumi.ComponentResourceOptions,
) => { environment: ProvisionedEnvironment };

/** The one problem a missing SSH key is, as the root program reports it at preview. */
export const SSH_KEY_REQUIRED = problem(
  "sshPrivateKey",
  "is required for an onprem environment: the key that logs in to every machine; run 'pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519'",
  undefined,
);

/** Each provisioning kind's component. */
export const PROVISIONERS: { [K in Kind]: ClusterProvisioner<K> } = {
  aws: (name, { environment, network }, opts) => new AwsCluster(name, { environment, network }, opts),
  gcp: (name, { environment, network }, opts) => new GcpCluster(name, { environment, network }, opts),
  onprem: (name, { environment, network, secrets }, opts) => {
    if (secrets.sshPrivateKey === undefined) throw new ConfigError(SSH_KEY_REQUIRED);
    return new OnpremCluster(name, { environment, network, privateKey: secrets.sshPrivateKey }, opts);
  },
};

/** Provisions the environment's cluster, named for `environment.name`. */
export function provisionEnvironment(
  environment: ProvisioningEnvironmentConfig,
  network: ClusterNetworks,
  secrets: ProvisioningSecrets = {},
  opts?: pulumi.ComponentResourceOptions,
): ProvisionedEnvironment {
  const provision = PROVISIONERS[environment.kind] as ClusterProvisioner<Kind>;
  const { nodeCidr, podCidr, serviceCidr, flannelVxlanPort } = network;
  return provision(
    environment.name,
    {
      environment,
      network: {
        nodeCidr,
        podCidr,
        serviceCidr,
        ...(flannelVxlanPort !== undefined && { flannelVxlanPort }),
      },
      secrets,
    },
    opts,
  ).environment;
}
