// Builds the cloud-routes side of an LB pod from its config: which instance it runs on (its Node's
// providerID, else the metadata service), the cloud's client (credentials from the instance: the
// AWS SDK's default chain, GCP's service account), and the loop that keeps the route tables
// pointing at live LB pods.
// The controller (controller.ts) starts it in routingMode cloud-routes and feeds it the VIPs its data
// plane serves.
import { EC2Client } from "@aws-sdk/client-ec2";
import { loadGcpClients, type GcpClients } from "./gcpClients.ts";
import { CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Service } from "@kubernetes/client-node";
import { cidrContains, type LbConfig } from "@portable-lb/core/config";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { SkippedItem } from "../controller/desiredState.ts";
import { isOurs, refOf, statusVips } from "../controller/desiredState.ts";
import type { EventType } from "../controller/eventSink.ts";
import { AwsRouteLoop } from "./awsRouteLoop.ts";
import { AwsRouteTables } from "./awsRouteTables.ts";
import { CloudRoutesMetrics } from "./cloudRoutesMetrics.ts";
import type { CloudCallError } from "./failureCause.ts";
import { GcpRouteLoop } from "./gcpRouteLoop.ts";
import { GcpRoutes } from "./gcpRoutes.ts";
import { resolveIdentity, type InstanceIdentity } from "./instanceIdentity.ts";
import { awsImds, gcpMetadata } from "./instanceMetadata.ts";
import { groupLabel } from "./routeLeases.ts";
import type { RouteLoopOptions, RouteVips, ServiceRef } from "./routeLoop.ts";

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
  /** GCP: the compute clients to use (tests point them at a fake); default, the REST clients. */
  gcpClients?: GcpClients | undefined;
}

export interface CloudRoutes {
  /**
   * After each reconcile: the VIPs this pod's data plane serves, the cluster's Services, and the VIPs
   * their Services hold back (portable-lb.io/announce "false": routed by no LB pod of the group).
   */
  setVips(served: readonly string[], services: readonly V1Service[], heldBack?: ReadonlySet<string>): void;
  /** Graceful stop: hands this pod's VIPs over at once. */
  stop(): Promise<void>;
}

/**
 * The VIPs of the group's Services, and which Service each belongs to. A held-back VIP counts as
 * none of the group's: the loops then remove the routes to LB pods they find for it, as for a VIP no
 * Service has (AWS: its fenced owner; GCP: each pod its own), and leave any other route alone.
 */
export function routeVips(
  config: LbConfig,
  served: readonly string[],
  services: readonly V1Service[],
  heldBack: ReadonlySet<string> = new Set(),
): RouteVips {
  const byVip = new Map<string, ServiceRef>();
  for (const svc of services)
    if (isOurs(svc, config)) for (const vip of statusVips(svc)) byVip.set(vip, refOf(svc));
  const routed = (vip: string) => !heldBack.has(vip);
  return {
    cluster: new Set([...byVip.keys()].filter(routed)),
    served: new Set(served.filter(routed)),
    services: byVip,
  };
}

/** AWS's region of an availability zone (us-east-1a -> us-east-1). */
const regionOf = (zone: string) => zone.replace(/[a-z]$/, "");

/** What the AWS and GCP parts share: who this pod is, where it reports, its metrics. */
interface Common {
  o: CloudRoutesOptions;
  metrics: CloudRoutesMetrics;
  /** Whether an address is one of our VIPs (inside a VIP pool). */
  isVip: (ip: string) => boolean;
  loop: RouteLoopOptions;
}

const NOTHING: CloudRoutes = { setVips: () => {}, stop: () => Promise.resolve() };

/** Reports a pod whose instance is unknown: its data plane serves on, but no VIP is routed to it. */
async function instanceUnknown(c: Common, message: string): Promise<CloudRoutes> {
  c.metrics.failures.inc({ cause: "identity" });
  await c.o.report([{ ...c.o.pod, reason: "CloudInstanceUnknown", message }]);
  return NOTHING;
}

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
  const found = await resolveIdentity(
    { name: o.nodeName, providerId: node?.spec?.providerID },
    settings.cloud,
    settings.cloud === "aws" ? awsImds() : gcpMetadata(),
  );
  const pools = o.config.vipPools.map((p) => p.cidr);
  const c: Common = {
    o,
    metrics,
    isVip: (ip) => pools.some((p) => cidrContains(p, ip)),
    loop: {
      kubeconfig: o.kubeconfig,
      api: o.kubeconfig.makeApiClient(CoordinationV1Api),
      namespace: o.namespace,
      identity: o.identity,
      loadBalancerClass: o.config.loadBalancerClass,
      node: o.nodeName,
      metrics,
      log: o.log,
      report: o.report,
      pod: o.pod,
      timing: { durationS: settings.leaseDurationS, renewMs: settings.renewMs },
      resyncMs: settings.resyncS * 1000,
    },
  };
  if (!found.identity) return instanceUnknown(c, found.problem);
  o.log.info({ instance: found.identity, source: found.source }, "cloud routes: this pod's instance");
  const onRetry = (err: CloudCallError) => {
    metrics.retries.inc({ cause: err.reason });
    o.log.warn({ cause: err.reason, action: err.action }, "cloud call failed; retrying");
  };
  const onWrite = (op: string) => metrics.writes.inc({ op });
  const loop =
    found.identity.cloud === "aws"
      ? awsLoop(c, found.identity, { onRetry, onWrite })
      : await gcpLoop(c, found.identity, { onRetry, onWrite });
  const started = await loop.start().then(
    () => true,
    (err: unknown) =>
      instanceUnknown(
        c,
        `cannot find this pod's instance in ${settings.cloud} (${(err as Error).message}); its data plane serves on, but no VIP is routed to it`,
      ).then(() => false),
  );
  if (!started) return NOTHING;
  return {
    setVips: (served, services, heldBack) => loop.setVips(routeVips(o.config, served, services, heldBack)),
    stop: () => loop.stop(),
  };
}

interface Hooks {
  onRetry: (err: CloudCallError) => void;
  onWrite: (op: string) => void;
}

function awsLoop(c: Common, self: Extract<InstanceIdentity, { cloud: "aws" }>, hooks: Hooks): AwsRouteLoop {
  const region = process.env.AWS_REGION ?? regionOf(self.zone);
  const tables = new AwsRouteTables({
    // Our retries (retryPolicy.ts), not the SDK's: each is counted by cause.
    // A hung request would stall the sync: the SDK sets no timeout of its own.
    ec2: new EC2Client({
      region,
      maxAttempts: 1,
      requestHandler: { requestTimeout: 10_000, connectionTimeout: 3_000 },
    }),
    region,
    tableIds: c.o.config.cloudRoutes!.routeTableIds ?? [],
    isVip: c.isVip,
    ...hooks,
  });
  return new AwsRouteLoop({ ...c.loop, self, tables });
}

async function gcpLoop(
  c: Common,
  self: Extract<InstanceIdentity, { cloud: "gcp" }>,
  hooks: Hooks,
): Promise<GcpRouteLoop> {
  const settings = c.o.config.cloudRoutes!;
  // Credentials from the instance's service account (the metadata server).
  const clients = c.o.gcpClients ?? (await loadGcpClients());
  const routes = new GcpRoutes({
    ...clients,
    project: settings.project ?? self.project,
    network: settings.network ?? "default",
    group: groupLabel(c.o.config.loadBalancerClass),
    isVip: c.isVip,
    ...hooks,
  });
  return new GcpRouteLoop({ ...c.loop, self, routes });
}
