// The GCP cloud-routes writer on its own (lb-image/src/cloudRoutes/gcpRoutes.ts; the loop, with LB
// pod processes, is cloudRoutesGcp.test.ts) through the official @google-cloud/compute client over REST, against the routes CONTRACT FAKE (no Compute API
// emulator exists as a registry package; test/harness/cloud/gcpRoutesFake.ts says what it models).
// Two and three LB pods hold equal-priority routes for one VIP at once (ECMP); inserts and deletes
// wait for their operations; duplicates and missing routes are idempotent; throttling and 5xx are
// retried; a pod's graceful stop deletes its routes; a dead instance's routes are removed by the
// pod fenced to clean up; others' routes are never touched.
import { gcpClientsFor } from "../harness/cloud/gcpClients.ts";
import { GcpRoutesFake } from "../harness/cloud/gcpRoutesFake.ts";
import { GcpRoutes } from "../../lb-image/src/cloudRoutes/gcpRoutes.ts";
import { planGcpRoutes } from "../../lb-image/src/cloudRoutes/gcpRoutePlan.ts";

const PROJECT = "contract-project";
const VIP = "10.1.40.1";
const instance = (n: string) => `projects/${PROJECT}/zones/europe-west1-b/instances/${n}`;
const PODS = ["lb-a", "lb-b", "lb-c"].map(instance);

let fake: GcpRoutesFake;
let clients: Awaited<ReturnType<typeof gcpClientsFor>>;
const retries: string[] = [];

function writer(): GcpRoutes {
  return new GcpRoutes({
    ...clients,
    project: PROJECT,
    network: "default",
    group: "g1",
    isVip: (ip) => ip.startsWith("10.1.40."),
    retry: { attempts: 5, baseMs: 10, capMs: 50 },
    onRetry: (e) => retries.push(e.reason),
  });
}

/** One sync of a pod: list, plan, apply (what the loop does each time something changes). */
async function sync(self: string, served: string[], cleanUp: string[] = []): Promise<void> {
  const w = writer();
  const plan = planGcpRoutes({
    routes: (await w.list()).owned,
    served: new Set(served),
    self,
    cleanUp: new Set(cleanUp),
  });
  for (const vip of plan.insert) await w.insert(vip, self);
  for (const r of plan.delete) await w.delete(r);
}

const nextHops = (vip: string) =>
  [...fake.routes.values()]
    .filter((r) => r.destRange === `${vip}/32`)
    .map((r) => r.nextHopInstance)
    .sort();

beforeAll(async () => {
  fake = new GcpRoutesFake({ operationMs: 100 });
  await fake.start();
  clients = await gcpClientsFor(fake.port);
});

afterAll(async () => {
  await clients.routes.close();
  await clients.operations.close();
  await fake.stop();
});

describe("cloud routes on GCP (contract fake, official client over REST)", () => {
  it("two, then three pods hold equal-priority routes for one VIP at once", async () => {
    await Promise.all(PODS.slice(0, 2).map((p) => sync(p, [VIP])));
    expect(nextHops(VIP)).toEqual(PODS.slice(0, 2).sort());
    await sync(PODS[2]!, [VIP]);
    expect(nextHops(VIP)).toEqual([...PODS].sort());
    const priorities = new Set([...fake.routes.values()].map((r) => r.priority));
    expect(priorities).toEqual(new Set([1000]));
  });

  it("waits for each insert's operation: the route exists when insert returns", async () => {
    const w = writer();
    await w.insert("10.1.40.2", PODS[0]!);
    expect(nextHops("10.1.40.2")).toEqual([PODS[0]]);
    expect(fake.calls.get("POST operations wait")).toBeGreaterThan(0);
  });

  it("treats a duplicate (409) and a missing route (404) as done", async () => {
    const w = writer();
    await expect(w.insert("10.1.40.2", PODS[0]!)).resolves.toBeUndefined();
    const [route] = (await w.list()).owned.filter((r) => r.vip === "10.1.40.2");
    await w.delete(route!);
    await expect(w.delete(route!)).resolves.toBeUndefined();
    expect(nextHops("10.1.40.2")).toEqual([]);
  });

  it("retries throttling (429) and server errors (503)", async () => {
    retries.length = 0;
    fake.failNext(2, 429);
    await writer().insert("10.1.40.3", PODS[1]!);
    fake.failNext(1, 503);
    await writer().insert("10.1.40.4", PODS[1]!);
    expect(retries).toEqual(["throttled", "throttled", "server"]);
    expect(nextHops("10.1.40.3")).toEqual([PODS[1]]);
  });

  it("deletes a stopping pod's own routes, and a dead instance's routes by the fenced pod", async () => {
    await sync(PODS[0]!, []); // graceful stop: serves nothing any more
    expect(nextHops(VIP)).toEqual([PODS[1], PODS[2]].sort());
    await sync(PODS[1]!, [VIP, "10.1.40.3", "10.1.40.4"], [PODS[2]!]); // lb-c's node crashed
    expect(nextHops(VIP)).toEqual([PODS[1]]);
  });

  it("never touches a route that is not ours, and lists it as foreign", async () => {
    const [op] = await clients.routes.insert({
      project: PROJECT,
      routeResource: {
        name: "someone-else",
        destRange: `${VIP}/32`,
        priority: 1000,
        nextHopInstance: instance("x"),
        description: "a team's own route",
      },
    });
    const operation = (op.latestResponse as { name: string }).name;
    await clients.operations.wait({ project: PROJECT, operation });
    await sync(PODS[1]!, [], [instance("x")]);
    expect(nextHops(VIP)).toEqual([instance("x")]);
    expect((await writer().list()).foreign).toEqual([
      { name: "someone-else", vip: VIP, target: instance("x") },
    ]);
  });
});
