// The AWS cloud-routes loop of an LB pod. Each VIP has one owner among the live LB pods (rendezvous
// hashing over the member Leases), fenced by a Lease per VIP; the owner points VIP/32 at its
// instance's primary ENI in every configured route table. A graceful stop first points its VIPs at
// their successors itself, while its Leases still fence it (awsHandover.ts), then releases them, so
// the successor finds nothing to write; a crashed pod's Leases expire. Cloud calls
// happen only when what this pod must write changes, plus one read per resync (routeLoop.ts has
// the Lease and runner machinery both clouds share).
import { planAwsHandover } from "./awsHandover.ts";
import { planAwsRoutes, planIsEmpty, type AwsRoutePlan, type TableRoute } from "./awsRoutePlan.ts";
import type { AwsRouteTables } from "./awsRouteTables.ts";
import { providerId, type InstanceIdentity } from "./instanceIdentity.ts";
import { assignOwners } from "./ownerAssignment.ts";
import { RouteLoop, type RouteLoopOptions } from "./routeLoop.ts";
import { liveMembers, ourTargets, vipLeaseName } from "./routeLeases.ts";

export interface AwsRouteLoopOptions extends RouteLoopOptions {
  /** This pod's instance (instanceIdentity.ts). */
  self: Extract<InstanceIdentity, { cloud: "aws" }>;
  tables: AwsRouteTables;
}

export class AwsRouteLoop extends RouteLoop<AwsRouteLoopOptions> {
  /** What the Leases say this pod writes now (renewLeases), which syncCloud makes true. */
  private want: { point: Set<string>; remove: Set<string>; ours: Set<string> } | undefined;
  private self: { instance: string; eni: string } | undefined;
  private routes: TableRoute[] = [];
  private local: { table: string; cidr: string }[] = [];
  /** The tables the last read could read: nothing is written to the others (reported instead). */
  private readable: string[] = [];

  /** Finds this instance's ENI, then runs until stop(). Throws when the instance cannot be found. */
  async start(): Promise<void> {
    const eni = await this.o.tables.primaryEni(this.o.self.instanceId);
    this.self = { instance: providerId(this.o.self), eni };
    await this.run();
  }

  protected async renewLeases(): Promise<void> {
    const self = this.self;
    if (!self || this.stopped) return;
    if (!(await this.holdMember({ instance: self.instance, target: self.eni }))) return;
    const all = [...this.leaseCache.list()];
    const now = Date.now();
    const members = liveMembers(all, now, this.watchedSince).map((m) => m.identity);
    if (!members.includes(this.o.identity)) members.push(this.o.identity); // the cache may lag our write
    const ours = ourTargets(all).add(self.eni);
    const stale = new Set(
      this.routes.filter((r) => ours.has(r.target) && !this.vips.cluster.has(r.vip)).map((r) => r.vip),
    );
    const owners = assignOwners([...new Set([...this.vips.served, ...stale])], members);
    const mine = new Set([...owners].filter(([, o]) => o === this.o.identity).map(([v]) => v));
    const names = await this.holdOwned(
      vipLeaseName(this.group, ""),
      [...mine].map((v) => vipLeaseName(this.group, v)),
      "vip",
    );
    const held = [...mine].filter((v) => names.includes(vipLeaseName(this.group, v)));
    const point = new Set(held.filter((v) => this.vips.served.has(v)));
    const remove = new Set(held.filter((v) => stale.has(v)));
    this.want = { point, remove, ours };
    this.o.metrics.ownedVips.set(point.size);
    this.cloudRunner.trigger();
  }

  protected async syncCloud(): Promise<void> {
    const self = this.self;
    if (!self || !this.want || this.stopped) return;
    if (this.lastRead === 0) {
      await this.read();
      this.leaseRunner.trigger(); // stale routes may have come to light
    }
    const { point, remove, ours } = this.want;
    const key = JSON.stringify([[...point].sort(), [...remove].sort(), [...ours].sort()]);
    if (this.upToDate(key)) return;
    await this.read();
    const plan = planAwsRoutes({
      tables: this.readable,
      routes: this.routes,
      point,
      remove,
      self: self.eni,
      ours,
      local: this.local,
    });
    await this.reportForeign(plan.foreign.map((r) => ({ ...r, where: `route table ${r.table}` })));
    this.o.metrics.unroutableVips.set(new Set(plan.inside.map((i) => i.vip)).size);
    if (plan.inside.length)
      await this.o.report(
        plan.inside.map((i) => ({
          ...this.subject(i.vip),
          reason: "VipInsideVpcRange",
          message: `VIP ${i.vip} lies inside route table ${i.table}'s local range ${i.cidr} (the VPC's own addresses), which AWS delivers in the VPC whatever route is added; pick a VIP pool outside the VPC's CIDRs`,
        })),
      );
    const fenced = this.fenced(plan);
    const failures = planIsEmpty(fenced) ? [] : await this.o.tables.apply(fenced, self.eni);
    if (!planIsEmpty(fenced)) this.lastRead = 0; // what we wrote is read back at the next change
    await this.reportFailures(failures);
    if (failures.length === 0) {
      this.appliedKey = key;
      this.o.metrics.synced();
      await this.reportRouted(
        point,
        `${self.instance}, ${self.eni} in ${this.o.tables.tableIds().join(", ")}`,
      );
    } else this.cloudRunner.later();
  }

  private async read(): Promise<void> {
    const result = await this.o.tables.read();
    this.routes = result.routes;
    this.local = result.local;
    const failed = new Set(result.failed.map((f) => f.table));
    this.readable = this.o.tables.tableIds().filter((t) => !failed.has(t));
    this.lastRead = Date.now();
    await this.reportFailures(result.failed.map((f) => f.error));
  }

  /** The plan's writes for VIPs whose Lease this pod still holds (one may run out while it reads). */
  private fenced(plan: AwsRoutePlan): AwsRoutePlan {
    const stillHeld = (c: { vip: string }) => this.leases.holds(vipLeaseName(this.group, c.vip));
    return {
      ...plan,
      create: plan.create.filter(stillHeld),
      replace: plan.replace.filter(stillHeld),
      remove: plan.remove.filter(stillHeld),
    };
  }

  /**
   * Graceful stop, nothing else writing any more: each VIP whose Lease this pod still holds is
   * pointed at its successor (from a fresh read: only routes to our pods are replaced). A VIP
   * without a live successor keeps its route; a failed write is left to the successor.
   */
  protected async beforeRelease(): Promise<void> {
    const vips = [...this.vips.served].filter((v) => this.leases.holds(vipLeaseName(this.group, v)));
    if (!this.self || !vips.length) return;
    const all = [...this.leaseCache.list()];
    await this.read();
    const handover = planAwsHandover({
      vips,
      self: this.o.identity,
      // Strictly live (every Lease judged): a VIP handed to a member that may be dead black-holes.
      members: liveMembers(all, Date.now(), 0),
      tables: this.readable,
      routes: this.routes,
      ours: ourTargets(all).add(this.self.eni),
      local: this.local,
    });
    const written = await Promise.all(
      handover.moves.map(async ({ target, plan }) => {
        const fenced = this.fenced(plan);
        const failures = await this.o.tables.apply(fenced, target);
        await this.reportFailures(failures);
        return fenced.create.length + fenced.replace.length - failures.length;
      }),
    );
    this.o.log.info(
      {
        handedOver: Object.fromEntries(handover.moves.flatMap((m) => m.vips.map((v) => [v, m.successor]))),
        writes: written.reduce((a, b) => a + b, 0),
        orphaned: handover.orphaned,
        unknownTarget: handover.unknownTarget,
      },
      "VIPs handed over to their successors",
    );
  }
}
