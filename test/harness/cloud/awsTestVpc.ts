// A VPC in moto for the cloud-routes tests: route tables, LB instances (each with its primary ENI)
// and an instance that is not ours, plus helpers to read where a VIP's route points.
import {
  CreateRouteCommand,
  CreateRouteTableCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeInstancesCommand,
  DescribeRouteTablesCommand,
  RunInstancesCommand,
  type EC2Client,
} from "@aws-sdk/client-ec2";

export interface TestInstance {
  instanceId: string;
  zone: string;
  eni: string;
  providerId: string;
}

export async function createTestVpc(ec2: EC2Client, o: { tables: number; instances: number }) {
  const vpc = (await ec2.send(new CreateVpcCommand({ CidrBlock: "10.0.0.0/16" }))).Vpc!.VpcId!;
  const subnet = (await ec2.send(new CreateSubnetCommand({ VpcId: vpc, CidrBlock: "10.0.1.0/24" }))).Subnet!
    .SubnetId!;
  const tables: string[] = [];
  for (let i = 0; i < o.tables; i++)
    tables.push((await ec2.send(new CreateRouteTableCommand({ VpcId: vpc }))).RouteTable!.RouteTableId!);
  const run = await ec2.send(
    new RunInstancesCommand({
      ImageId: "ami-12c6146b",
      MinCount: o.instances,
      MaxCount: o.instances,
      SubnetId: subnet,
    }),
  );
  const ids = run.Instances!.map((i) => i.InstanceId!);
  const described = await ec2.send(new DescribeInstancesCommand({ InstanceIds: ids }));
  const instances: TestInstance[] = described
    .Reservations!.flatMap((r) => r.Instances!)
    .map((i) => {
      const zone = i.Placement!.AvailabilityZone!;
      return {
        instanceId: i.InstanceId!,
        zone,
        eni: i.NetworkInterfaces!.find((n) => n.Attachment?.DeviceIndex === 0)!.NetworkInterfaceId!,
        providerId: `aws:///${zone}/${i.InstanceId!}`,
      };
    });
  return { vpc, subnet, tables, instances };
}

/** Where each table's VIP/32 route points, for each of `vips` (undefined: no route), in one read. */
export async function routeTargetsOf(
  ec2: EC2Client,
  tables: string[],
  vips: readonly string[],
): Promise<Map<string, (string | undefined)[]>> {
  const out = await ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: tables }));
  const routesOf = (t: string) => out.RouteTables!.find((r) => r.RouteTableId === t)?.Routes ?? [];
  return new Map(
    vips.map((vip) => [
      vip,
      tables.map((t) => routesOf(t).find((r) => r.DestinationCidrBlock === `${vip}/32`)?.NetworkInterfaceId),
    ]),
  );
}

/** Where each table's VIP/32 route points (undefined: no route). */
export async function routeTargets(
  ec2: EC2Client,
  tables: string[],
  vip: string,
): Promise<(string | undefined)[]> {
  return (await routeTargetsOf(ec2, tables, [vip])).get(vip)!;
}

export function createRoute(ec2: EC2Client, table: string, vip: string, eni: string) {
  return ec2.send(
    new CreateRouteCommand({
      RouteTableId: table,
      DestinationCidrBlock: `${vip}/32`,
      NetworkInterfaceId: eni,
    }),
  );
}
