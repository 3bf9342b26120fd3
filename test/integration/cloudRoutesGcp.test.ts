// The GCP cloud-routes loop with three processes running the controller's cloud-routes part
// (startCloudRoutes, as built), real Leases in the shared control plane, and Nodes whose providerID
// names GCE instances, against the routes CONTRACT FAKE (no Compute API emulator exists as a
// registry package; test/harness/cloud/gcpRoutesFake.ts says what it models) through the official
// @google-cloud/compute client over REST. Every pod holds an equal-priority route for every VIP
// (ECMP); stale routes are cleaned at start; a foreign route is left alone and reported; a graceful
// stop deletes the pod's routes first; a SIGKILLed pod's routes are deleted by one other pod, once
// its member Lease expires; throttling and 5xx are retried; without the API server the routes stay.
import { waitUntil } from "@portable-lb/lab";
import { gcpRouteDescription, gcpRouteName } from "../../lb-image/src/cloudRoutes/gcpRoutePlan.ts";
import { groupLabel } from "../../lb-image/src/cloudRoutes/routeLeases.ts";
import { GCP_NETWORK, GCP_PROJECT, GcpRouteRig } from "../harness/cloud/gcpRouteRig.ts";
import { apiServerProxy, expectFailStatic, rigBase, afterRig } from "../harness/cloud/cloudRigTesting.ts";
import type { TcpProxy } from "../harness/tcpProxy.ts";

const NS = `cloudroutes-gcp-${process.pid}`;
const CLASS = "portable-lb.io/cloudroutes-gcp";
const VIPS = Array.from({ length: 4 }, (_, i) => `10.1.50.${i + 1}`);
const STALE_VIP = "10.1.50.200";
const PODS = ["lb-a", "lb-b", "lb-c"];
/** An instance that ran an LB pod of this group once and runs none now (an old node). */
const GONE = `projects/${GCP_PROJECT}/zones/europe-west1-b/instances/lb-gone`;
const FOREIGN = `projects/${GCP_PROJECT}/zones/europe-west1-b/instances/someone-else`;

const rig = new GcpRouteRig({
  ...rigBase(NS, CLASS),
  vips: VIPS,
  pods: PODS,
  cloudRoutes: { leaseDurationS: 3, renewMs: 1000 },
});
let apiProxy: TcpProxy;

const events = (reason: string) => rig.events(reason);

/** A route put straight into the fake, as someone (or an earlier LB pod) left it. */
function putRoute(name: string, vip: string, instance: string, description?: string): void {
  rig.fake.routes.set(name, {
    name,
    destRange: `${vip}/32`,
    priority: 1000,
    network: `https://compute.googleapis.com/compute/v1/projects/${GCP_PROJECT}/global/networks/${GCP_NETWORK}`,
    nextHopInstance: instance,
    ...(description !== undefined && { description }),
    selfLink: `https://compute.googleapis.com/compute/v1/projects/${GCP_PROJECT}/global/routes/${name}`,
    creationTimestamp: new Date().toISOString(),
  });
}

/** A route of this group, as a pod of it makes them. */
function putOurs(vip: string, instance: string): void {
  const group = groupLabel(CLASS);
  putRoute(gcpRouteName(group, vip, instance), vip, instance, gcpRouteDescription(group, vip, instance));
}

const routed = (live: string[], ms = 30_000) => rig.allRoutedTo(live, VIPS.slice(1), ms);

/**
 * Starts pods and waits until they run: the compute clients load their protos at start
 * (~1 s of CPU each), which takes far longer for three processes on a loaded 2-core machine.
 */
async function start(pods: string[], o: { server?: string } = {}): Promise<void> {
  pods.forEach((pod) => rig.start(pod, o));
  expect(await rig.running(pods)).toBe(true);
}

beforeAll(async () => {
  await rig.setup();
  apiProxy = await apiServerProxy();
  // Someone else's route for one of our VIPs; ours to an instance that runs no LB pod any more;
  // ours to a live pod's instance for a VIP no Service has any more.
  putRoute("someone-else", VIPS[0]!, FOREIGN, "a team's own route");
  putOurs(VIPS[1]!, GONE);
  putOurs(STALE_VIP, rig.instanceOf("lb-a"));
}, 300_000);

afterRig(rig, () => apiProxy);

describe("cloud routes on GCP (contract fake, official client over REST)", () => {
  it("every pod holds an equal-priority route for every VIP at once (ECMP)", async () => {
    await start(PODS);
    expect(await routed(PODS)).toBe(true);
    const ours = [...rig.fake.routes.values()].filter((r) => r.description?.startsWith("portable-lb"));
    expect(new Set(ours.map((r) => r.priority))).toEqual(new Set([1000]));
    expect(ours).toHaveLength(PODS.length * VIPS.length);
  }, 300_000);

  it("cleans up at start: a gone instance's routes, and routes for VIPs no Service has", async () => {
    expect(rig.nextHops(VIPS[1]!)).not.toContain(GONE);
    expect(await waitUntil(() => rig.nextHops(STALE_VIP).length === 0, 10_000, 50)).toBe(true);
  }, 20_000);

  it("leaves a foreign route for a VIP alone and reports it on the Service", async () => {
    expect(rig.nextHops(VIPS[0]!)).toEqual([FOREIGN, ...PODS.map((p) => rig.instanceOf(p))].sort());
    expect(await rig.eventSeen("ForeignRoute")).toBe(true);
    const [e] = await events("ForeignRoute");
    expect(e!.involvedObject).toMatchObject({ kind: "Service", name: "web-0" });
    expect(e!.message).toContain(
      `route someone-else in network ${GCP_NETWORK} already routes ${VIPS[0]}/32 to ${FOREIGN}`,
    );
  }, 20_000);

  it("deletes a pod's own routes at a graceful stop, at once", async () => {
    const t0 = performance.now();
    await rig.stop("lb-a", "SIGTERM");
    expect(rig.output("lb-a")).toContain('"msg":"stopped"');
    // Its routes were gone before the process ended.
    expect(await routed(["lb-b", "lb-c"], 0)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(5_000);
    await start(["lb-a"]);
    expect(await routed(PODS)).toBe(true);
  }, 300_000);

  it("deletes a SIGKILLed pod's routes from one other pod, once its Lease expires", async () => {
    const deletes = rig.fake.calls.get("DELETE routes") ?? 0;
    const t0 = performance.now();
    await rig.stop("lb-b", "SIGKILL");
    expect(await routed(["lb-a", "lb-c"], 15_000)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(8_000); // a 3 s Lease, renewed every second
    // One pod at a time (the clean-up Lease): each route deleted once, no 404 from a second pod.
    expect((rig.fake.calls.get("DELETE routes") ?? 0) - deletes).toBe(VIPS.length);
  }, 300_000);

  it("retries throttling (429) and server errors (503)", async () => {
    rig.fake.failNext(2, 429);
    await start(["lb-b"]);
    expect(await routed(PODS)).toBe(true);
    rig.fake.failNext(1, 503);
    await rig.stop("lb-c", "SIGTERM");
    expect(await routed(["lb-a", "lb-b"])).toBe(true);
    expect(rig.output("lb-b")).toContain('"cause":"throttled"');
    expect(rig.output("lb-c")).toContain('"cause":"server"');
    await start(["lb-c"]);
    expect(await routed(PODS)).toBe(true);
  }, 300_000);

  it("keeps the routes as they are when the API server is lost (fail static)", async () => {
    await expectFailStatic(rig, apiProxy, {
      routed: (live) => routed(live),
      snapshot: () => Promise.resolve(VIPS.map((v) => rig.nextHops(v))),
      dies: "lb-b",
    });
  }, 300_000);
});
