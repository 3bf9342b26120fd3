// Which cloud instance an LB pod runs on. The Kubernetes way first: the Node's spec.providerID, set by
// the cloud's node controller (aws:///ZONE/i-..., gce://PROJECT/ZONE/NAME); the instance metadata
// service as fallback where a cluster runs without one.

export type InstanceIdentity =
  | { cloud: "aws"; zone: string; instanceId: string }
  | { cloud: "gcp"; project: string; zone: string; name: string };

const AWS = /^aws:\/\/\/([a-z0-9-]+)\/(i-[0-9a-f]{8,17})$/;
const GCE = /^gce:\/\/([a-z0-9.:-]+)\/([a-z0-9-]+)\/([a-z]([-a-z0-9]{0,61}[a-z0-9])?)$/;

/** The instance a providerID names, or undefined when it names none we know. */
export function parseProviderId(providerId: string | undefined): InstanceIdentity | undefined {
  if (!providerId) return undefined;
  const aws = AWS.exec(providerId);
  if (aws) return { cloud: "aws", zone: aws[1]!, instanceId: aws[2]! };
  const gce = GCE.exec(providerId);
  if (gce) return { cloud: "gcp", project: gce[1]!, zone: gce[2]!, name: gce[3]! };
  return undefined;
}

/** The providerID form of an identity (the inverse of parseProviderId). */
export function providerId(id: InstanceIdentity): string {
  return id.cloud === "aws"
    ? `aws:///${id.zone}/${id.instanceId}`
    : `gce://${id.project}/${id.zone}/${id.name}`;
}

/** Where the instance metadata service is asked when a Node has no providerID. */
export interface MetadataSource {
  /** This instance's identity, or undefined when no metadata service answers. */
  identity(): Promise<InstanceIdentity | undefined>;
}

export type IdentityResult =
  | { identity: InstanceIdentity; source: "providerID" | "metadata" }
  | { identity: undefined; problem: string };

/** The identity from the Node's providerID, else from the metadata service, else a problem to report. */
export async function resolveIdentity(
  node: { name: string; providerId: string | undefined },
  cloud: InstanceIdentity["cloud"],
  metadata: MetadataSource | undefined,
): Promise<IdentityResult> {
  const fromNode = parseProviderId(node.providerId);
  if (fromNode?.cloud === cloud) return { identity: fromNode, source: "providerID" };
  const fromMetadata = await metadata?.identity().catch(() => undefined);
  if (fromMetadata?.cloud === cloud) return { identity: fromMetadata, source: "metadata" };
  const seen = node.providerId ? `spec.providerID "${node.providerId}"` : "no spec.providerID";
  return {
    identity: undefined,
    problem:
      `Node ${node.name} has ${seen} naming no ${cloud} instance, and the instance metadata service did not answer; ` +
      `this LB pod cannot point VIPs at its instance: run the cloud's node controller (it sets providerID) or allow metadata access`,
  };
}
