// Bad input to the AWS cloud-routes mode, against moto's real EC2 server with IAM enforced (moto
// checks each request's signature and action against its IAM users' policies): an LB pod whose role
// lacks the route writes, a Node without providerID (and no metadata service), and a VIP inside
// the VPC's own range. Each gets one clear Event and a metric; the rest keeps serving: the VIPs
// the permitted pod owns are routed to it.
import { EC2Client } from "@aws-sdk/client-ec2";
import { waitUntil } from "@portable-lb/lab";
import { ownerOf } from "../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { rigBase, afterRig } from "../harness/cloud/cloudRigTesting.ts";
import { AwsRouteRig } from "../harness/cloud/awsRouteRig.ts";
import { enforceIam, motoUser, type MotoUser } from "../harness/cloud/motoIam.ts";
import { MOTO_REGION } from "../harness/cloud/motoServer.ts";

const NS = `cloudroutes-bad-${process.pid}`;
const VIPS = Array.from({ length: 6 }, (_, i) => `10.1.60.${i + 1}`);
/** Inside the test VPC's 10.0.0.0/16: each table's local route delivers it in the VPC. */
const INSIDE_VIP = "10.0.9.5";
/** Permitted; lacks ec2:CreateRoute and ec2:ReplaceRoute; its Node has no providerID. */
const [OK, DENIED, NO_ID] = ["lb-ok", "lb-denied", "lb-noid"] as const;
const MEMBERS = [OK, DENIED];

const rig = new AwsRouteRig({
  ...rigBase(NS, "portable-lb.io/cloudroutes-bad"),
  vips: [...VIPS, INSIDE_VIP],
  pods: [OK, DENIED, NO_ID],
  extraPools: ["10.0.9.0/24"],
  withoutProviderId: [NO_ID],
});
let denied: MotoUser;

const events = (reason: string) => rig.events(reason);

/** A counter or gauge's value in the pod's metrics (0 when absent). */
async function metric(pod: string, series: string): Promise<number> {
  const line = (await rig.metrics(pod)).split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

beforeAll(async () => {
  await rig.setup();
  const admin = await motoUser(rig.moto, "lb-admin", ["ec2:*"]);
  denied = await motoUser(rig.moto, "lb-readonly", ["ec2:Describe*", "ec2:DeleteRoute"]);
  await enforceIam(rig.moto);
  // The test reads the tables as the admin from now on.
  rig.ec2.destroy();
  rig.ec2 = new EC2Client({
    endpoint: rig.moto.endpoint,
    region: MOTO_REGION,
    credentials: admin.credentials,
    maxAttempts: 1,
  });
  rig.start(OK, { credentials: admin.credentials });
  rig.start(DENIED, { credentials: denied.credentials });
  rig.start(NO_ID, { credentials: admin.credentials });
}, 60_000);

afterRig(rig);

describe("cloud routes on AWS: bad input (moto, IAM enforced)", () => {
  it("serves the VIPs the permitted pod owns, whatever the others lack", async () => {
    const mine = VIPS.filter((v) => ownerOf(v, MEMBERS) === OK);
    expect(mine.length).toBeGreaterThan(0);
    expect(await rig.allRoutedToOwners(MEMBERS, mine, 60_000)).toBe(true);
  }, 90_000);

  it("names the missing IAM action and the route table's ARN when a write is denied", async () => {
    expect(await rig.eventSeen("CloudPermissionDenied")).toBe(true);
    const [e] = await events("CloudPermissionDenied");
    expect(e!.involvedObject).toMatchObject({ kind: "Pod", name: DENIED });
    // CreateRoute, or ReplaceRoute when the other pod wrote the route first (start order decides):
    // either way the Event names the very action the role was denied.
    const named =
      /^missing permission (ec2:(?:Create|Replace)Route) on arn:aws:ec2:us-east-1:\d{12}:route-table\/rtb-[0-9a-f]+: grant it to the LB instances' role/.exec(
        e!.message ?? "",
      );
    expect(named).not.toBeNull();
    expect(e!.message).toContain(`${denied.arn} is not authorized to perform: ${named![1]}`);
    expect(
      await metric(DENIED, 'portable_lb_cloud_route_failures_total{cause="permission"}'),
    ).toBeGreaterThan(0);
  }, 60_000);

  it("reports a Node without providerID (and no metadata service) on the pod, which routes nothing", async () => {
    expect(await rig.eventSeen("CloudInstanceUnknown")).toBe(true);
    const [e] = await events("CloudInstanceUnknown");
    expect(e!.involvedObject).toMatchObject({ kind: "Pod", name: NO_ID });
    expect(e!.message).toContain(`Node ${rig.nodeName(NO_ID)} has no spec.providerID naming no aws instance`);
    expect(await metric(NO_ID, 'portable_lb_cloud_route_failures_total{cause="identity"}')).toBe(1);
  }, 60_000);

  it("reports a VIP inside the VPC's own range on its Service, and routes it nowhere", async () => {
    expect(await rig.eventSeen("VipInsideVpcRange")).toBe(true);
    const [e] = await events("VipInsideVpcRange");
    expect(e!.involvedObject).toMatchObject({ kind: "Service", name: `web-${VIPS.length}` });
    expect(e!.message).toContain(`VIP ${INSIDE_VIP} lies inside route table`);
    expect(e!.message).toContain("local range 10.0.0.0/16");
    // The Event may come from the pod that held the VIP before its owner joined; the owner's gauge
    // tells once it has taken the VIP's Lease over.
    const owner = ownerOf(INSIDE_VIP, MEMBERS)!;
    expect(
      await waitUntil(
        async () => (await metric(owner, "portable_lb_cloud_route_unroutable_vips")) === 1,
        20_000,
        100,
      ),
    ).toBe(true);
  }, 60_000);
});
