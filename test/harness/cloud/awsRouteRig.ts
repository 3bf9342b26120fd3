// The AWS cloud-routes rig shared by the integration test and the benchmark: moto with a VPC (route
// tables, one instance per LB pod and one that is not ours), a namespace with Nodes naming those
// instances and LoadBalancer Services holding the VIPs, and the LB pods' cloud-routes processes
// (cloudRoutesProcess.mjs), started and stopped by pid. Everything it starts, stop() ends.
import type { EC2Client } from "@aws-sdk/client-ec2";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { LbConfigInput } from "@portable-lb/core/config";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ownerOf } from "../../../lb-image/src/cloudRoutes/ownerAssignment.ts";
import { lbService } from "../../../lb-image/src/controller/testing/k8sObjects.ts";
import { waitUntil } from "@portable-lb/lab";
import { repoRoot } from "../repoRoot.ts";
import { createTestVpc, routeTargets, type TestInstance } from "./awsTestVpc.ts";
import { MOTO_CREDENTIALS, MOTO_REGION, startMoto, type MotoServer } from "./motoServer.ts";
import { ThrottlingProxy } from "./throttlingProxy.ts";

export interface RigOptions {
  kubeconfig: KubeConfig;
  kubeconfigPath: string;
  namespace: string;
  loadBalancerClass: string;
  vips: string[];
  pods: string[];
  tables?: number;
  /** Route table ids configured besides the rig's (e.g. one that does not exist). */
  extraTableIds?: string[];
  cloudRoutes?: Partial<NonNullable<LbConfigInput["cloudRoutes"]>>;
}

interface Proc {
  child: ChildProcess;
  out: string[];
}

export class AwsRouteRig {
  readonly o: RigOptions;
  readonly core: CoreV1Api;
  moto!: MotoServer;
  ec2!: EC2Client;
  /** A fault proxy in front of moto (throttling on demand; counts the calls through it). */
  proxy!: ThrottlingProxy;
  tables: string[] = [];
  lbInstances: TestInstance[] = [];
  foreign!: TestInstance;
  readonly procs = new Map<string, Proc>();
  private dir = "";

  constructor(o: RigOptions) {
    this.o = o;
    this.core = o.kubeconfig.makeApiClient(CoreV1Api);
  }

  nodeName(pod: string): string {
    return `${this.o.namespace}-node-${this.o.pods.indexOf(pod)}`;
  }

  eniOf(pod: string): string {
    return this.lbInstances[this.o.pods.indexOf(pod)]!.eni;
  }

  async setup(): Promise<void> {
    const { namespace, pods, vips } = this.o;
    this.dir = mkdtempSync(join(tmpdir(), "cloudroutes-"));
    this.moto = await startMoto();
    this.ec2 = this.moto.ec2();
    this.proxy = new ThrottlingProxy({ host: "127.0.0.1", port: this.moto.port });
    await this.proxy.start();
    const vpc = await createTestVpc(this.ec2, { tables: this.o.tables ?? 2, instances: pods.length + 1 });
    this.tables = vpc.tables;
    this.lbInstances = vpc.instances.slice(0, pods.length);
    this.foreign = vpc.instances[pods.length]!;
    const config: LbConfigInput = {
      loadBalancerClass: this.o.loadBalancerClass,
      routingMode: "cloud-routes",
      podCidr: "10.244.0.0/16",
      vipPools: [{ name: "web", cidr: `${vips[0]!.split(".").slice(0, 3).join(".")}.0/24` }],
      dataPlane: { mode: "nftables" },
      cloudRoutes: {
        cloud: "aws",
        routeTableIds: [...this.tables, ...(this.o.extraTableIds ?? [])],
        ...this.o.cloudRoutes,
      },
    };
    writeFileSync(join(this.dir, "config.json"), JSON.stringify(config));
    await this.core.createNamespace({ body: { metadata: { name: namespace } } });
    for (const [i, pod] of pods.entries())
      await this.core.createNode({
        body: {
          metadata: { name: this.nodeName(pod) },
          spec: { providerID: this.lbInstances[i]!.providerId },
        },
      });
    for (const [i, vip] of vips.entries()) {
      const name = `web-${i}`;
      await this.core.createNamespacedService({
        namespace,
        body: lbService(name, { ns: namespace, class: this.o.loadBalancerClass }),
      });
      const svc = await this.core.readNamespacedService({ name, namespace });
      await this.core.replaceNamespacedServiceStatus({
        name,
        namespace,
        body: { ...svc, status: { loadBalancer: { ingress: [{ ip: vip, ipMode: "VIP" }] } } },
      });
    }
  }

  /** Starts a pod's process; `endpoint` (default moto) is where its EC2 calls go. */
  start(pod: string, o: { endpoint?: string; server?: string } = {}): void {
    const child = spawn(
      process.execPath,
      [
        "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
        join(repoRoot(), "test/harness/cloud/cloudRoutesProcess.mjs"),
        ...["--config", join(this.dir, "config.json"), "--kubeconfig", this.o.kubeconfigPath],
        ...["--namespace", this.o.namespace, "--identity", pod, "--node", this.nodeName(pod)],
        ...(o.server ? ["--server", o.server] : []),
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: {
          ...process.env,
          AWS_ENDPOINT_URL_EC2: o.endpoint ?? this.moto.endpoint,
          AWS_REGION: MOTO_REGION,
          AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
        },
      },
    );
    const out: string[] = [];
    child.stdout.on("data", (d: Buffer) => out.push(d.toString()));
    child.stderr.on("data", (d: Buffer) => out.push(d.toString()));
    this.procs.set(pod, { child, out });
  }

  /** Sends `signal` and waits for the exit (SIGKILL after 10 s). */
  async stop(pod: string, signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    const p = this.procs.get(pod);
    if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
    const exited = new Promise((r) => p.child.once("exit", r));
    p.child.kill(signal);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  }

  output(pod: string): string {
    return this.procs.get(pod)?.out.join("") ?? "";
  }

  /** True when every table routes `vip` to the ENI of its owner among `live` pods. */
  async routedToOwner(vip: string, live: string[]): Promise<boolean> {
    const want = this.eniOf(ownerOf(vip, live)!);
    return (await routeTargets(this.ec2, this.tables, vip)).every((t) => t === want);
  }

  /** Waits (polling every 50 ms, at most `ms`) until every VIP points at its owner among `live`. */
  allRoutedToOwners(live: string[], vips: string[], ms = 20_000): Promise<boolean> {
    return waitUntil(
      async () => (await Promise.all(vips.map((v) => this.routedToOwner(v, live)))).every(Boolean),
      ms,
      50,
    );
  }

  /** Synchronous last resort (an exit handler): SIGKILL every process it started, by pid. */
  killNow(): void {
    for (const p of this.procs.values()) p.child.kill("SIGKILL");
    this.moto?.killNow();
  }

  async teardown(): Promise<void> {
    for (const pod of this.procs.keys()) await this.stop(pod, "SIGKILL");
    await this.core.deleteNamespace({ name: this.o.namespace }).catch(() => {});
    for (const pod of this.o.pods) await this.core.deleteNode({ name: this.nodeName(pod) }).catch(() => {});
    await this.proxy?.stop();
    this.ec2?.destroy();
    await this.moto?.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}
