// The AWS cloud-routes rig shared by the integration tests and the benchmark: moto with a VPC (route
// tables, one instance per LB pod and one that is not ours) and a fault proxy in front of it, on top
// of the namespace, Nodes, Services and LB pod processes every cloud's rig has (cloudRouteRig.ts).
// Everything it starts, teardown() ends.
import type { EC2Client } from "@aws-sdk/client-ec2";
import { waitUntil } from "@portable-lb/lab";
import { ownerOf } from "../../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { createTestVpc, routeTargetsOf, type TestInstance } from "./awsTestVpc.ts";
import { CloudRouteRig, type RigOptions } from "./cloudRouteRig.ts";
import { MOTO_CREDENTIALS, MOTO_REGION, startMoto, type MotoServer } from "./motoServer.ts";
import { ThrottlingProxy } from "./throttlingProxy.ts";

export interface AwsRigOptions extends RigOptions {
  tables?: number;
  /** Route table ids configured besides the rig's (e.g. one that does not exist). */
  extraTableIds?: string[];
}

export class AwsRouteRig extends CloudRouteRig {
  readonly aws: AwsRigOptions;
  moto!: MotoServer;
  ec2!: EC2Client;
  /** A fault proxy in front of moto (throttling on demand; counts the calls through it). */
  proxy!: ThrottlingProxy;
  tables: string[] = [];
  lbInstances: TestInstance[] = [];
  foreign!: TestInstance;

  constructor(o: AwsRigOptions) {
    super(o);
    this.aws = o;
  }

  eniOf(pod: string): string {
    return this.lbInstances[this.o.pods.indexOf(pod)]!.eni;
  }

  async setup(): Promise<void> {
    const { pods } = this.o;
    this.moto = await startMoto();
    this.ec2 = this.moto.ec2();
    this.proxy = new ThrottlingProxy({ host: "127.0.0.1", port: this.moto.port });
    await this.proxy.start();
    const vpc = await createTestVpc(this.ec2, { tables: this.aws.tables ?? 2, instances: pods.length + 1 });
    this.tables = vpc.tables;
    this.lbInstances = vpc.instances.slice(0, pods.length);
    this.foreign = vpc.instances[pods.length]!;
    await this.setupCluster(
      { cloud: "aws", routeTableIds: [...this.tables, ...(this.aws.extraTableIds ?? [])] },
      this.lbInstances.map((i) => i.providerId),
    );
  }

  /**
   * Starts a pod's process; `endpoint` (default moto) is where its EC2 calls go, `credentials`
   * (default moto's anything-goes pair) whose they are.
   */
  start(
    pod: string,
    o: {
      endpoint?: string;
      server?: string;
      credentials?: { accessKeyId: string; secretAccessKey: string };
    } = {},
  ): void {
    const credentials = o.credentials ?? MOTO_CREDENTIALS;
    this.spawn(
      pod,
      {
        AWS_ENDPOINT_URL_EC2: o.endpoint ?? this.moto.endpoint,
        AWS_REGION: MOTO_REGION,
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      },
      { ...(o.server && { server: o.server }) },
    );
  }

  /** True when every table routes each of `vips` to the ENI of its owner among `live` pods (one read). */
  async routedToOwners(live: string[], vips: string[]): Promise<boolean> {
    const targets = await routeTargetsOf(this.ec2, this.tables, vips);
    return vips.every((v) => targets.get(v)!.every((t) => t === this.eniOf(ownerOf(v, live)!)));
  }

  /** Waits (polling every `everyMs`, at most `ms`) until every VIP points at its owner among `live`. */
  allRoutedToOwners(live: string[], vips: string[], ms = 20_000, everyMs = 50): Promise<boolean> {
    return waitUntil(() => this.routedToOwners(live, vips), ms, everyMs);
  }

  override killNow(): void {
    super.killNow();
    this.moto?.killNow();
  }

  async teardown(): Promise<void> {
    await this.teardownCluster();
    await this.proxy?.stop();
    this.ec2?.destroy();
    await this.moto?.stop();
  }
}
