// The AWS cloud-routes mode against moto's real EC2 server on loopback, with three processes running
// the controller's cloud-routes part (startCloudRoutes, as built), real Leases in the shared control
// plane, and Nodes whose providerID names moto instances. The route of each VIP follows its owner,
// VIPs spread over the pods, a SIGKILLed owner's VIPs move once its Lease expires, a graceful stop
// hands them over at once, throttled writes are retried, a foreign route is left alone and reported,
// a stale route to one of ours is removed, and without the API server the routes stay as they are.
import { ownerOf } from "../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { waitUntil } from "@portable-lb/lab";
import { AwsRouteRig } from "../harness/cloud/awsRouteRig.ts";
import { createRoute, routeTargets } from "../harness/cloud/awsTestVpc.ts";
import { apiServerProxy, expectFailStatic, rigBase, afterRig } from "../harness/cloud/cloudRigTesting.ts";
import type { TcpProxy } from "../harness/tcpProxy.ts";

const NS = `cloudroutes-${process.pid}`;
const VIPS = Array.from({ length: 8 }, (_, i) => `10.1.20.${i + 1}`);
const STALE_VIP = "10.1.20.200";
const FOREIGN_VIP = VIPS[0]!;
/** The VIPs whose every route is ours to write. */
const OWN_VIPS = VIPS.slice(1);
const PODS = ["lb-a", "lb-b", "lb-c"];
/** A configured route table that does not exist: reported, and the others are served. */
const UNKNOWN_TABLE = "rtb-0000000000dead";

const rig = new AwsRouteRig({
  ...rigBase(NS, "portable-lb.io/cloudroutes-aws"),
  vips: VIPS,
  pods: PODS,
  cloudRoutes: { leaseDurationS: 3, renewMs: 1000 },
  extraTableIds: [UNKNOWN_TABLE],
});
let apiProxy: TcpProxy;

const routes = (vip: string) => routeTargets(rig.ec2, rig.tables, vip);
// Generous: the machine is shared, and processes start slowly under load.
const allRouted = (live: string[], ms = 30_000) => rig.allRoutedToOwners(live, OWN_VIPS, ms);

const events = (reason: string) => rig.events(reason);

beforeAll(async () => {
  await rig.setup();
  apiProxy = await apiServerProxy();
  // Someone else's route for one of our VIPs, and a route to one of our instances for a VIP no
  // Service has any more (as a crashed earlier LB pod would leave).
  await createRoute(rig.ec2, rig.tables[0]!, FOREIGN_VIP, rig.foreign.eni);
  await createRoute(rig.ec2, rig.tables[1]!, STALE_VIP, rig.eniOf("lb-b"));
}, 60_000);

afterRig(rig, () => apiProxy);

/** Stops an owner with `signal`; ms until its VIPs point at the others' ENIs, then restarts it. */
async function moveOnStop(signal: "SIGTERM" | "SIGKILL"): Promise<number> {
  const pod = PODS.find((p) => OWN_VIPS.some((v) => ownerOf(v, PODS) === p))!;
  const t0 = performance.now();
  await rig.stop(pod, signal);
  expect(
    await allRouted(
      PODS.filter((p) => p !== pod),
      15_000,
    ),
  ).toBe(true);
  const ms = performance.now() - t0;
  rig.start(pod);
  expect(await allRouted(PODS)).toBe(true);
  return ms;
}

describe("cloud routes on AWS (moto)", () => {
  it("points each VIP at its owner's ENI in every table, spread over the pods", async () => {
    PODS.forEach((pod) => rig.start(pod));
    expect(await allRouted(PODS)).toBe(true);
    const owners = new Set(OWN_VIPS.map((v) => ownerOf(v, PODS)));
    expect(owners.size).toBeGreaterThanOrEqual(2);
    const targets = new Set((await Promise.all(OWN_VIPS.map(routes))).flat());
    expect(targets).toEqual(new Set([...owners].map((p) => rig.eniOf(p!))));
  }, 60_000);

  it("leaves a foreign route for a VIP alone and reports it on the Service", async () => {
    expect(await rig.eventSeen("ForeignRoute")).toBe(true);
    const [e] = await events("ForeignRoute");
    expect(e!.involvedObject.kind).toBe("Service");
    expect(e!.message).toContain(rig.foreign.eni);
    // The other table is ours to write.
    expect(await routes(FOREIGN_VIP)).toEqual([rig.foreign.eni, rig.eniOf(ownerOf(FOREIGN_VIP, PODS)!)]);
  }, 20_000);

  it("reports an unknown route table on the pod, and serves the others", async () => {
    expect(await rig.eventSeen("CloudResourceNotFound")).toBe(true);
    const [e] = await events("CloudResourceNotFound");
    expect(e!.involvedObject.kind).toBe("Pod");
    expect(e!.message).toContain(
      `ec2:DescribeRouteTables on arn:aws:ec2:us-east-1:*:route-table/${UNKNOWN_TABLE}`,
    );
    expect(await allRouted(PODS, 1_000)).toBe(true);
  }, 20_000);

  it("removes a stale route to one of our instances", async () => {
    expect(await waitUntil(async () => (await routes(STALE_VIP)).every((t) => !t), 10_000, 100)).toBe(true);
  }, 20_000);

  it("tells each Service where its VIP is routed", async () => {
    const routed = await events("VipRouted");
    expect(new Set(routed.map((e) => e.involvedObject.name)).size).toBeGreaterThanOrEqual(OWN_VIPS.length);
  });

  it("hands a stopped pod's VIPs over at once (graceful stop)", async () => {
    expect(await moveOnStop("SIGTERM")).toBeLessThan(3_000);
  }, 60_000);

  it("moves a SIGKILLed owner's VIPs once its Lease expires", async () => {
    // The Lease lasts 3 s; pods renew every second.
    expect(await moveOnStop("SIGKILL")).toBeLessThan(8_000);
  }, 90_000);

  it("retries throttled writes until they go through", async () => {
    // lb-c's calls go through the fault proxy; stopping lb-a moves some VIPs to it.
    await rig.stop("lb-c", "SIGTERM");
    rig.proxy.throttle(3);
    rig.start("lb-c", { endpoint: rig.proxy.endpoint });
    expect(await allRouted(PODS)).toBe(true);
    await rig.stop("lb-a", "SIGTERM");
    expect(await allRouted(["lb-b", "lb-c"])).toBe(true);
    expect(rig.proxy.throttled).toBe(3);
    expect(rig.output("lb-c")).toContain('"cause":"throttled"');
    rig.start("lb-a");
    expect(await allRouted(PODS)).toBe(true);
  }, 120_000);

  it("keeps the routes as they are when the API server is lost (fail static)", async () => {
    await expectFailStatic(rig, apiProxy, {
      routed: (live) => allRouted(live),
      snapshot: () => Promise.all(VIPS.map(routes)),
      dies: "lb-b",
    });
  }, 90_000);
});
