// Builds the cloud-routes side of an LB pod from its config: which instance it runs on (its Node's
// providerID, else the metadata service), the cloud's client (credentials from the instance role
// through the SDK's default chain), and the loop that keeps the route tables pointing at live LB pods.
// The controller (controller.ts) starts it in routingMode cloud-routes and feeds it the VIPs its data
// plane serves.
import { EC2Client } from "@aws-sdk/client-ec2";
import { CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Service } from "@kubernetes/client-node";
import { cidrContains, type LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { SkippedItem } from "../controller/desiredState.ts";
import { isOurs, refOf, statusVips } from "../controller/desiredState.ts";
import type { EventType } from "../controller/eventSink.ts";
import { AwsRouteLoop, type RouteVips, type ServiceRef } from "./awsRouteLoop.ts";
import { AwsRouteTables } from "./awsRouteTables.ts";
import { CloudRoutesMetrics } from "./cloudRoutesMetrics.ts";
import { resolveIdentity } from "./instanceIdentity.ts";
import { awsImds } from "./instanceMetadata.ts";

export interface CloudRoutesOptions {
  config: LbConfig;
  kubeconfig: KubeConfig;
  log: Logger;
  namespace: string;
  identity: string;
  nodeName: string;
  pod: { object: string; kind: "Pod"; uid?: string | undefined };
  registry: Registry;
  report: (items: SkippedItem[], type?: EventType) => Promise<void>;
}

export interface CloudRoutes {
  /** After each reconcile: the VIPs this pod's data plane serves, and the cluster's Services. */
  setVips(served: readonly string[], services: readonly V1Service[]): void;
  /** Graceful stop: hands this pod's VIPs over at once. */
  stop(): Promise<void>;
}

/** The VIPs of the group's Services, and which Service each belongs to. */
export function routeVips(
  config: LbConfig,
  served: readonly string[],
  services: readonly V1Service[],
): RouteVips {
  const byVip = new Map<string, ServiceRef>();
  for (const svc of services)
    if (isOurs(svc, config.loadBalancerClass)) for (const vip of statusVips(svc)) byVip.set(vip, refOf(svc));
  return { cluster: new Set(byVip.keys()), served: new Set(served), services: byVip };
}

/** AWS's region of an availability zone (us-east-1a -> us-east-1). */
const regionOf = (zone: string) => zone.replace(/[a-z]$/, "");

export async function startCloudRoutes(o: CloudRoutesOptions): Promise<CloudRoutes> {
  const settings = o.config.cloudRoutes!;
  const metrics = new CloudRoutesMetrics(o.registry);
  const node = await o.kubeconfig
    .makeApiClient(CoreV1Api)
    .readNode({ name: o.nodeName })
    .catch((err: unknown) => {
      o.log.warn({ err, node: o.nodeName }, "cannot read this pod's Node; asking the metadata service");
      return undefined;
    });
  if (settings.cloud !== "aws")
    throw new Error(`cloudRoutes.cloud: ${settings.cloud} routes are not built yet; use aws`);
  const found = await resolveIdentity(
    { name: o.nodeName, providerId: node?.spec?.providerID },
    settings.cloud,
    awsImds(),
  );
  if (!found.identity || found.identity.cloud !== "aws") {
    // The data plane serves on; this pod only never becomes a route target.
    metrics.failures.inc({ cause: "identity" });
    await o.report([
      { ...o.pod, reason: "CloudInstanceUnknown", message: "problem" in found ? found.problem : "" },
    ]);
    return { setVips: () => {}, stop: () => Promise.resolve() };
  }
  const self = found.identity;
  o.log.info({ instance: self, source: found.source }, "cloud routes: this pod's instance");
  const region = process.env.AWS_REGION ?? regionOf(self.zone);
  const pools = o.config.vipPools.map((p) => p.cidr);
  const tables = new AwsRouteTables({
    // Our retries (retryPolicy.ts), not the SDK's: each is counted by cause.
    // A hung request would stall the sync: the SDK sets no timeout of its own.
    ec2: new EC2Client({
      region,
      maxAttempts: 1,
      requestHandler: { requestTimeout: 10_000, connectionTimeout: 3_000 },
    }),
    region,
    tableIds: settings.routeTableIds ?? [],
    isVip: (ip) => pools.some((c) => cidrContains(c, ip)),
    onRetry: (err) => {
      metrics.retries.inc({ cause: err.reason });
      o.log.warn({ cause: err.reason, action: err.action }, "cloud call failed; retrying");
    },
    onWrite: (op) => metrics.writes.inc({ op }),
  });
  const loop = new AwsRouteLoop({
    kubeconfig: o.kubeconfig,
    api: o.kubeconfig.makeApiClient(CoordinationV1Api),
    namespace: o.namespace,
    identity: o.identity,
    loadBalancerClass: o.config.loadBalancerClass,
    node: o.nodeName,
    self,
    tables,
    metrics,
    log: o.log,
    report: o.report,
    pod: o.pod,
    timing: { durationS: settings.leaseDurationS, renewMs: settings.renewMs },
    resyncMs: settings.resyncS * 1000,
  });
  await loop.start().catch(async (err: unknown) => {
    metrics.failures.inc({ cause: "identity" });
    await o.report([
      {
        ...o.pod,
        reason: "CloudInstanceUnknown",
        message: `cannot find this pod's instance in AWS (${(err as Error).message}); its data plane serves on, but no VIP is routed to it`,
      },
    ]);
  });
  return {
    setVips: (served, services) => loop.setVips(routeVips(o.config, served, services)),
    stop: () => loop.stop(),
  };
}
