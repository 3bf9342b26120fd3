// The GCP cloud-routes loop of an LB pod. GCP spreads a destination's traffic over routes of equal
// priority (ECMP), so every live LB pod keeps its own VIP/32 route to its instance for each VIP it
// serves, fenced by its member Lease: a pod that cannot renew it writes nothing. Routes of
// instances that no longer run a live LB pod (a crashed node, an old install) are deleted by the
// others: each such instance gets an owner among the live pods (rendezvous hashing) and a Lease, so
// one pod at a time cleans up after it. A graceful stop deletes the pod's own routes first. Cloud
// calls happen only when what this pod must write changes, plus one list per resync.
import type { GcpRoutes, ForeignRoute } from "./gcpRoutes.ts";
import { planGcpRoutes, type OwnedRoute } from "./gcpRoutePlan.ts";
import { providerId, type InstanceIdentity } from "./instanceIdentity.ts";
import { assignOwners } from "./ownerAssignment.ts";
import { RouteLoop, type RouteLoopOptions } from "./routeLoop.ts";
import { cleanupLeaseName, liveMembers } from "./routeLeases.ts";
import type { CloudCallError } from "./failureCause.ts";

export interface GcpRouteLoopOptions extends RouteLoopOptions {
  /** This pod's instance (instanceIdentity.ts). */
  self: Extract<InstanceIdentity, { cloud: "gcp" }>;
  routes: GcpRoutes;
}

/** An instance as a route's next hop takes it (a partial URL). */
export function instanceUrl(id: Extract<InstanceIdentity, { cloud: "gcp" }>): string {
  return `projects/${id.project}/zones/${id.zone}/instances/${id.name}`;
}

export class GcpRouteLoop extends RouteLoop<GcpRouteLoopOptions> {
  private readonly self: string;
  /** What the Leases say this pod writes now (renewLeases), which syncCloud makes true. */
  private want: { serve: Set<string>; cleanUp: Set<string> } | undefined;
  private routes: OwnedRoute[] = [];
  private foreign: ForeignRoute[] = [];
  /** The live members' targets when last seen: routes read before a change may miss some. */
  private aliveKey = "";

  constructor(o: GcpRouteLoopOptions) {
    super(o);
    this.self = instanceUrl(o.self);
  }

  async start(): Promise<void> {
    await this.run();
  }

  private cleanupLease(instance: string): string {
    return cleanupLeaseName(this.group, instance);
  }

  protected async renewLeases(): Promise<void> {
    if (this.stopped) return;
    if (!(await this.holdMember({ instance: providerId(this.o.self), target: this.self }))) {
      this.want = undefined;
      return;
    }
    const live = liveMembers([...this.leaseCache.list()], Date.now(), this.watchedSince);
    const members = live.map((m) => m.identity);
    if (!members.includes(this.o.identity)) members.push(this.o.identity); // the cache may lag our write
    const alive = new Set([...live.map((m) => m.target), this.self]);
    // A member that joined since the last read has routes it may not show (and a member that left
    // may be one of them): read the routes again before judging whose are dead.
    const aliveKey = [...alive].sort().join(" ");
    if (aliveKey !== this.aliveKey) {
      this.aliveKey = aliveKey;
      this.lastRead = 0;
    }
    const dead = [...new Set(this.routes.map((r) => r.instance))].filter((i) => !alive.has(i));
    const owners = assignOwners(dead, members);
    const mine = dead.filter((i) => owners.get(i) === this.o.identity);
    const held = await this.holdOwned(
      this.cleanupLease(""),
      mine.map((i) => this.cleanupLease(i)),
      "cleanup",
    );
    const cleanUp = new Set(mine.filter((i) => held.includes(this.cleanupLease(i))));
    this.want = { serve: new Set(this.vips.served), cleanUp };
    this.cloudRunner.trigger();
  }

  private async read(): Promise<void> {
    const { owned, foreign } = await this.o.routes.list();
    this.routes = owned;
    this.foreign = foreign;
    this.lastRead = Date.now();
  }

  protected async syncCloud(): Promise<void> {
    if (!this.want || this.stopped) return;
    if (this.lastRead === 0) {
      await this.read();
      this.leaseRunner.trigger(); // dead instances' routes may have come to light
    }
    // Read after the await: a failed renewal meanwhile leaves nothing to write.
    const want = this.want;
    if (!want) return;
    const { serve, cleanUp } = want;
    const key = JSON.stringify([[...serve].sort(), [...cleanUp].sort()]);
    if (this.upToDate(key)) return;
    await this.read();
    await this.reportForeign(
      this.foreign
        .filter((r) => serve.has(r.vip))
        .map((r) => ({
          vip: r.vip,
          target: r.target,
          where: `route ${r.name} in network ${this.o.routes.network()}`,
        })),
    );
    const plan = planGcpRoutes({ routes: this.routes, served: serve, self: this.self, cleanUp });
    // Fencing: this pod's own routes while its member Lease holds, a dead instance's while its
    // clean-up Lease does (checked again at each write: one may run out while others wait).
    const mayWrite = (instance: string) =>
      this.leases.holds(instance === this.self ? this.memberName() : this.cleanupLease(instance));
    const failures: CloudCallError[] = [];
    const attempt = (write: () => Promise<void>) =>
      write().catch((err: unknown) => void failures.push(err as CloudCallError));
    await Promise.all([
      ...plan.insert.map((vip) =>
        attempt(async () => {
          if (mayWrite(this.self)) await this.o.routes.insert(vip, this.self);
        }),
      ),
      ...plan.delete.map((r) =>
        attempt(async () => {
          if (mayWrite(r.instance)) await this.o.routes.delete(r);
        }),
      ),
    ]);
    if (plan.insert.length || plan.delete.length) this.lastRead = 0; // read back at the next change
    await this.reportFailures(failures);
    const mine = new Set([
      ...this.routes.filter((r) => r.instance === this.self && serve.has(r.vip)).map((r) => r.vip),
      ...plan.insert,
    ]);
    this.o.metrics.ownedVips.set(mine.size);
    if (failures.length === 0) {
      this.appliedKey = key;
      this.o.metrics.synced();
      await this.reportRouted(mine, `${this.self}, in network ${this.o.routes.network()}`);
    } else this.cloudRunner.later();
  }

  /** Graceful stop: this pod's routes go first, so no new flow is sent to it. */
  protected async beforeRelease(): Promise<void> {
    const { owned } = await this.o.routes.list();
    await Promise.all(owned.filter((r) => r.instance === this.self).map((r) => this.o.routes.delete(r)));
  }
}
