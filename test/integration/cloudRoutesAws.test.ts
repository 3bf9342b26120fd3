// The AWS cloud-routes mode against moto's real EC2 server on loopback, with three processes running
// the controller's cloud-routes part (startCloudRoutes, as built), real Leases in the shared control
// plane, and Nodes whose providerID names moto instances. The route of each VIP follows its owner,
// VIPs spread over the pods, a SIGKILLed owner's VIPs move once its Lease expires, a gracefully
// stopping pod points its VIPs at their successors itself before it exits, throttled writes are retried, a foreign route is left alone and reported,
// a stale route to one of ours is removed, and without the API server the routes stay as they are.
import { ownerOf } from "../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { waitUntil } from "@portable-lb/lab";
import { AwsRouteRig } from "../harness/cloud/awsRouteRig.ts";
import { createRoute, routeTargets, routeTargetsOf } from "../harness/cloud/awsTestVpc.ts";
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

/** A pod's metric `name` summed over its series (0 while it has none). */
async function metric(pod: string, name: string): Promise<number> {
  const text = await rig.metrics(pod);
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}
const writes = (pod: string) => metric(pod, "portable_lb_cloud_route_writes_total");

/** The first pod owning one of OWN_VIPS. */
const anOwner = () => PODS.find((p) => OWN_VIPS.some((v) => ownerOf(v, PODS) === p))!;

beforeAll(async () => {
  await rig.setup();
  apiProxy = await apiServerProxy();
  // Someone else's route for one of our VIPs, and a route to one of our instances for a VIP no
  // Service has any more (as a crashed earlier LB pod would leave).
  await createRoute(rig.ec2, rig.tables[0]!, FOREIGN_VIP, rig.foreign.eni);
  await createRoute(rig.ec2, rig.tables[1]!, STALE_VIP, rig.eniOf("lb-b"));
}, 60_000);

afterRig(rig, () => apiProxy);

/** SIGKILLs an owner; ms until its VIPs point at the others' ENIs, then restarts it. */
async function moveOnKill(): Promise<number> {
  const pod = anOwner();
  const t0 = performance.now();
  await rig.stop(pod, "SIGKILL");
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
    // The other table is ours to write (its route may land just after the Event: bounded wait).
    const want = [rig.foreign.eni, rig.eniOf(ownerOf(FOREIGN_VIP, PODS)!)];
    await waitUntil(async () => JSON.stringify(await routes(FOREIGN_VIP)) === JSON.stringify(want), 10_000);
    expect(await routes(FOREIGN_VIP)).toEqual(want);
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

  it("points a stopping pod's VIPs at their successors before it exits (graceful stop)", async () => {
    const pod = anOwner();
    const live = PODS.filter((p) => p !== pod);
    const moved = VIPS.filter((v) => ownerOf(v, PODS) === pod);
    const before = await routeTargetsOf(rig.ec2, rig.tables, moved);
    const toReplace = [...before.values()].flat().filter((t) => t === rig.eniOf(pod)).length;
    expect(toReplace).toBeGreaterThanOrEqual(2);
    const writesBefore = await Promise.all(live.map(writes));
    const t0 = performance.now();
    await rig.stop(pod, "SIGTERM");
    const ms = performance.now() - t0;
    // Read as the process has exited: the routes already point at the successors ownerOf picks.
    expect(
      await rig.routedToOwners(
        live,
        moved.filter((v) => OWN_VIPS.includes(v)),
      ),
    ).toBe(true);
    expect(ms).toBeLessThan(3_000);
    // ... written by the stopping pod, before it said it stopped.
    const out = rig.output(pod);
    const line = out.split("\n").find((l) => l.includes("VIPs handed over to their successors"));
    expect(line).toBeDefined();
    expect(out.indexOf(line!)).toBeLessThan(out.indexOf('"msg":"stopped"'));
    const said = JSON.parse(line!) as { handedOver: Record<string, string>; writes: number };
    expect(said.handedOver).toEqual(Object.fromEntries(moved.map((v) => [v, ownerOf(v, live)])));
    expect(said.writes).toBe(toReplace);
    // The successors take the freed VIP Leases, read, and find nothing to write.
    const synced = async (p: string) =>
      (await metric(p, "portable_lb_cloud_route_owned_vips")) ===
        VIPS.filter((v) => ownerOf(v, live) === p).length &&
      (await metric(p, "portable_lb_cloud_route_seconds_since_sync")) * 1000 < performance.now() - t0;
    expect(
      await waitUntil(async () => (await Promise.all(live.map(synced))).every(Boolean), 15_000, 100),
    ).toBe(true);
    expect(await Promise.all(live.map(writes))).toEqual(writesBefore);
    rig.start(pod);
    expect(await allRouted(PODS)).toBe(true);
  }, 60_000);

  it("moves a SIGKILLed owner's VIPs once its Lease expires", async () => {
    // The Lease lasts 3 s; pods renew every second.
    expect(await moveOnKill()).toBeLessThan(8_000);
  }, 90_000);

  it("retries throttled writes until they go through", async () => {
    // lb-c, restarted with its calls through the fault proxy, takes its VIPs back: its writes.
    expect(VIPS.some((v) => ownerOf(v, PODS) === "lb-c")).toBe(true);
    await rig.stop("lb-c", "SIGTERM");
    expect(await allRouted(["lb-a", "lb-b"])).toBe(true);
    rig.proxy.throttle(3);
    rig.start("lb-c", { endpoint: rig.proxy.endpoint });
    expect(await allRouted(PODS)).toBe(true);
    expect(rig.proxy.throttled).toBe(3);
    expect(rig.output("lb-c")).toContain('"cause":"throttled"');
  }, 120_000);

  it("keeps the routes as they are when the API server is lost (fail static)", async () => {
    await expectFailStatic(rig, apiProxy, {
      routed: (live) => allRouted(live),
      snapshot: () => Promise.all(VIPS.map(routes)),
      dies: "lb-b",
    });
  }, 90_000);
});
