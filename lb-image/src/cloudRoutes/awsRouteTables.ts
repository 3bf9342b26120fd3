// The AWS side, through the AWS SDK v3: reads our /32 routes from the configured route tables, finds
// an instance's primary ENI, and applies a plan (CreateRoute, ReplaceRoute, DeleteRoute), each call
// retried on throttling and 5xx (retryPolicy.ts). Credentials come from the SDK's default chain:
// the instance role in a pod, environment variables in tests.
import {
  CreateRouteCommand,
  DeleteRouteCommand,
  DescribeInstancesCommand,
  DescribeRouteTablesCommand,
  ReplaceRouteCommand,
  type EC2Client,
  type RouteTable,
} from "@aws-sdk/client-ec2";
import type { AwsRoutePlan, TableRoute } from "./awsRoutePlan.ts";
import type { CloudCallError } from "./failureCause.ts";
import { withRetry, type RetryPolicy } from "./retryPolicy.ts";

export interface AwsRouteTablesOptions {
  ec2: EC2Client;
  region: string;
  tableIds: readonly string[];
  /** Whether a /32 destination is one of our VIPs (inside a VIP pool). */
  isVip: (ip: string) => boolean;
  retry?: RetryPolicy;
  onRetry?: (err: CloudCallError) => void;
  /** Each write made: create, replace, delete. */
  onWrite?: (op: "create" | "replace" | "delete") => void;
}

export interface ReadResult {
  routes: TableRoute[];
  /** Each table's `local` routes: the VPC's own ranges, which no VIP route can override. */
  local: { table: string; cidr: string }[];
  /** Tables that could not be read (unknown id, no permission): nothing is written to them. */
  failed: { table: string; error: CloudCallError }[];
}

export class AwsRouteTables {
  private readonly o: AwsRouteTablesOptions;
  /** Account id per table, learned from reads, for the ARNs permission errors name. */
  private readonly owners = new Map<string, string>();

  constructor(o: AwsRouteTablesOptions) {
    this.o = o;
  }

  tableIds(): string[] {
    return [...this.o.tableIds];
  }

  arn(table: string): string {
    return `arn:aws:ec2:${this.o.region}:${this.owners.get(table) ?? "*"}:route-table/${table}`;
  }

  private call<T>(action: string, resource: string, fn: () => Promise<T>): Promise<T> {
    return withRetry(`ec2:${action}`, resource, fn, {
      ...(this.o.retry && { policy: this.o.retry }),
      ...(this.o.onRetry && { onRetry: this.o.onRetry }),
    });
  }

  /** The instance's primary network interface (device index 0), which routes point at. */
  async primaryEni(instanceId: string): Promise<string> {
    const arn = `arn:aws:ec2:${this.o.region}:*:instance/${instanceId}`;
    const out = await this.call("DescribeInstances", arn, () =>
      this.o.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] })),
    );
    const instance = out.Reservations?.[0]?.Instances?.[0];
    const eni = instance?.NetworkInterfaces?.find((n) => n.Attachment?.DeviceIndex === 0)?.NetworkInterfaceId;
    if (!eni) throw new Error(`instance ${instanceId} has no primary network interface (DescribeInstances)`);
    return eni;
  }

  /**
   * The /32 routes to VIPs in every configured table: one DescribeRouteTables for all (the steady
   * state's one call per resync); when that fails (one unknown table fails them all), each table
   * on its own, so the readable ones are served and the others reported.
   */
  async read(): Promise<ReadResult> {
    const result: ReadResult = { routes: [], local: [], failed: [] };
    const ids = this.o.tableIds;
    try {
      const out = await this.describe(ids, ids.length === 1 ? this.arn(ids[0]!) : this.arn("*"));
      for (const rt of out) this.take(rt, result);
      return result;
    } catch (err) {
      if (ids.length === 1) return { ...result, failed: [{ table: ids[0]!, error: err as CloudCallError }] };
    }
    await Promise.all(
      ids.map(async (table) => {
        try {
          for (const rt of await this.describe([table], this.arn(table))) this.take(rt, result);
        } catch (err) {
          result.failed.push({ table, error: err as CloudCallError });
        }
      }),
    );
    return result;
  }

  private async describe(ids: readonly string[], arn: string): Promise<RouteTable[]> {
    const out = await this.call("DescribeRouteTables", arn, () =>
      this.o.ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [...ids] })),
    );
    return out.RouteTables ?? [];
  }

  /** Adds a table's VIP routes and local ranges to `result`. */
  private take(rt: RouteTable, result: ReadResult): void {
    const table = rt.RouteTableId ?? "";
    if (rt.OwnerId) this.owners.set(table, rt.OwnerId);
    for (const r of rt.Routes ?? []) {
      if (r.GatewayId === "local" && r.DestinationCidrBlock)
        result.local.push({ table, cidr: r.DestinationCidrBlock });
      const vip = r.DestinationCidrBlock?.endsWith("/32") ? r.DestinationCidrBlock.slice(0, -3) : undefined;
      if (!vip || !this.o.isVip(vip)) continue;
      const target =
        r.NetworkInterfaceId ??
        r.InstanceId ??
        r.GatewayId ??
        r.NatGatewayId ??
        r.TransitGatewayId ??
        "other";
      result.routes.push({ table, vip, target });
    }
  }

  /** Applies the plan's writes; returns the ones that failed (the others stand). */
  async apply(plan: AwsRoutePlan, eni: string): Promise<CloudCallError[]> {
    const failures: CloudCallError[] = [];
    const write = async (
      op: "create" | "replace" | "delete",
      table: string,
      send: () => Promise<unknown>,
    ) => {
      const action = { create: "CreateRoute", replace: "ReplaceRoute", delete: "DeleteRoute" }[op];
      try {
        await this.call(action, this.arn(table), send);
        this.o.onWrite?.(op);
      } catch (err) {
        failures.push(err as CloudCallError);
      }
    };
    const dest = (vip: string) => `${vip}/32`;
    const pointAt = (c: { table: string; vip: string }) => ({
      RouteTableId: c.table,
      DestinationCidrBlock: dest(c.vip),
      NetworkInterfaceId: eni,
    });
    await Promise.all([
      ...plan.create.map((c) =>
        write("create", c.table, () => this.o.ec2.send(new CreateRouteCommand(pointAt(c)))),
      ),
      ...plan.replace.map((c) =>
        write("replace", c.table, () => this.o.ec2.send(new ReplaceRouteCommand(pointAt(c)))),
      ),
      ...plan.remove.map((c) =>
        write("delete", c.table, () =>
          this.o.ec2.send(
            new DeleteRouteCommand({ RouteTableId: c.table, DestinationCidrBlock: dest(c.vip) }),
          ),
        ),
      ),
    ]);
    return failures;
  }
}
