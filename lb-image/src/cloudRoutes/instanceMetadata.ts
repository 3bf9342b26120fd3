// The instance metadata services, the fallback when a Node has no providerID: AWS's IMDSv2 (a PUT for
// a session token, then GETs with it) and GCP's metadata server (GETs with Metadata-Flavor: Google).
import type { InstanceIdentity, MetadataSource } from "./instanceIdentity.ts";

const TIMEOUT_MS = 1_000;

async function get(url: string, headers: Record<string, string>, method = "GET"): Promise<string> {
  const res = await fetch(url, { method, headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
  if (!res.ok) throw new Error(`${method} ${url}: HTTP ${res.status}`);
  return (await res.text()).trim();
}

export function awsImds(base = "http://169.254.169.254"): MetadataSource {
  return {
    async identity(): Promise<InstanceIdentity> {
      const token = await get(
        `${base}/latest/api/token`,
        { "X-aws-ec2-metadata-token-ttl-seconds": "60" },
        "PUT",
      );
      const h = { "X-aws-ec2-metadata-token": token };
      const [instanceId, zone] = await Promise.all([
        get(`${base}/latest/meta-data/instance-id`, h),
        get(`${base}/latest/meta-data/placement/availability-zone`, h),
      ]);
      return { cloud: "aws", instanceId, zone };
    },
  };
}

export function gcpMetadata(base = "http://metadata.google.internal"): MetadataSource {
  return {
    async identity(): Promise<InstanceIdentity> {
      const h = { "Metadata-Flavor": "Google" };
      const [project, zonePath, name] = await Promise.all([
        get(`${base}/computeMetadata/v1/project/project-id`, h),
        get(`${base}/computeMetadata/v1/instance/zone`, h), // projects/NUMBER/zones/ZONE
        get(`${base}/computeMetadata/v1/instance/name`, h),
      ]);
      return { cloud: "gcp", project, zone: zonePath.split("/").pop()!, name };
    },
  };
}
