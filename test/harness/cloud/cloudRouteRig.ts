// What the AWS and GCP cloud-routes rigs share: a namespace with a Node per LB pod (its providerID
// naming the pod's instance, or none), LoadBalancer Services holding the VIPs, the LB config file,
// and the LB pods' cloud-routes processes (cloudRoutesProcess.mjs), started and stopped by pid, each
// serving its metrics on a loopback port of its own. Everything it starts, teardown() ends.
import { CoreV1Api, type CoreV1Event, type KubeConfig } from "@kubernetes/client-node";
import type { LbConfigInput } from "@portable-lb/core/config";
import { waitUntil } from "@portable-lb/lab";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lbService } from "../../../lb-image/src/controller/testing/k8sObjects.ts";
import { repoRoot } from "../repoRoot.ts";

export type CloudRoutesSettings = NonNullable<LbConfigInput["cloudRoutes"]>;

export interface RigOptions {
  kubeconfig: KubeConfig;
  kubeconfigPath: string;
  namespace: string;
  loadBalancerClass: string;
  vips: string[];
  pods: string[];
  /** Lease timing and the like, on top of the cloud's own settings. */
  cloudRoutes?: Partial<CloudRoutesSettings>;
  /** VIP pools besides the /24 of the first VIP. */
  extraPools?: string[];
  /** Pods whose Node has no providerID (a Node the cloud's node controller never saw). */
  withoutProviderId?: string[];
}

interface Proc {
  child: ChildProcess;
  out: string[];
}

export abstract class CloudRouteRig {
  readonly o: RigOptions;
  readonly core: CoreV1Api;
  readonly procs = new Map<string, Proc>();
  protected dir = "";

  constructor(o: RigOptions) {
    this.o = o;
    this.core = o.kubeconfig.makeApiClient(CoreV1Api);
  }

  nodeName(pod: string): string {
    return `${this.o.namespace}-node-${this.o.pods.indexOf(pod)}`;
  }

  /** Writes the LB config and creates the namespace, the Nodes and the Services with their VIPs. */
  protected async setupCluster(cloudRoutes: CloudRoutesSettings, providerIds: string[]): Promise<void> {
    const { namespace, pods, vips } = this.o;
    this.dir = mkdtempSync(join(tmpdir(), "cloudroutes-"));
    const config: LbConfigInput = {
      loadBalancerClass: this.o.loadBalancerClass,
      routingMode: "cloud-routes",
      podCidr: "10.244.0.0/16",
      vipPools: [
        { name: "web", cidr: `${vips[0]!.split(".").slice(0, 3).join(".")}.0/24` },
        ...(this.o.extraPools ?? []).map((cidr, i) => ({ name: `extra-${i}`, cidr })),
      ],
      dataPlane: { engine: "nftables" },
      cloudRoutes: { ...cloudRoutes, ...this.o.cloudRoutes },
    };
    writeFileSync(join(this.dir, "config.json"), JSON.stringify(config));
    await this.core.createNamespace({ body: { metadata: { name: namespace } } });
    for (const [i, pod] of pods.entries())
      await this.core.createNode({
        body: {
          metadata: { name: this.nodeName(pod) },
          spec: this.o.withoutProviderId?.includes(pod) ? {} : { providerID: providerIds[i]! },
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

  /** Starts a pod's process with `env` on top of ours, its API server at `server` (default the kubeconfig's). */
  protected spawn(pod: string, env: Record<string, string>, o: { server?: string; args?: string[] }): void {
    const child = spawn(
      process.execPath,
      [
        "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
        join(repoRoot(), "test/harness/cloud/cloudRoutesProcess.mjs"),
        ...["--config", join(this.dir, "config.json"), "--kubeconfig", this.o.kubeconfigPath],
        ...["--namespace", this.o.namespace, "--identity", pod, "--node", this.nodeName(pod)],
        ...(o.server ? ["--server", o.server] : []),
        ...(o.args ?? []),
      ],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } },
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
    let timer: NodeJS.Timeout | undefined;
    const exited = new Promise((r) => p.child.once("exit", r));
    p.child.kill(signal);
    // The timer is cleared: a pending one would keep Jest's worker alive after the last test.
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
    clearTimeout(timer);
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  }

  /** What the pod's process logged, and how it ended if it did. */
  output(pod: string): string {
    const p = this.procs.get(pod);
    if (!p) return "";
    const { exitCode, signalCode } = p.child;
    const ended = exitCode !== null || signalCode !== null ? `[exited: ${exitCode ?? signalCode}]\n` : "";
    return p.out.join("") + ended;
  }

  /** Waits (at most `ms`) until each pod's process says its cloud routes run. */
  running(pods: readonly string[], ms = 180_000): Promise<boolean> {
    return waitUntil(
      () => pods.every((p) => this.output(p).includes('"msg":"cloud routes running"')),
      ms,
      100,
    );
  }

  /** The Events with `reason` in the rig's namespace. */
  async events(reason: string): Promise<CoreV1Event[]> {
    const { items } = await this.core.listNamespacedEvent({ namespace: this.o.namespace });
    return items.filter((e) => e.reason === reason);
  }

  /** Waits (at most `ms`) for an Event with `reason` in the rig's namespace. */
  eventSeen(reason: string, ms = 30_000): Promise<boolean> {
    return waitUntil(async () => (await this.events(reason)).length > 0, ms, 100);
  }

  /** The pod's Prometheus metrics (its process logs the port it serves them on). */
  async metrics(pod: string): Promise<string> {
    let port: string | undefined;
    await waitUntil(
      () => (port = /"metricsPort":(\d+)/.exec(this.output(pod))?.[1]) !== undefined,
      10_000,
      50,
    );
    if (!port) throw new Error(`${pod} never said where its metrics are:\n${this.output(pod)}`);
    return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  }

  /** Synchronous last resort (an exit handler): SIGKILL every process it started, by pid. */
  killNow(): void {
    for (const p of this.procs.values()) p.child.kill("SIGKILL");
  }

  /** Stops the processes and removes what setupCluster made. */
  protected async teardownCluster(): Promise<void> {
    for (const pod of this.procs.keys()) await this.stop(pod, "SIGKILL");
    await this.core.deleteNamespace({ name: this.o.namespace }).catch(() => {});
    for (const pod of this.o.pods) await this.core.deleteNode({ name: this.nodeName(pod) }).catch(() => {});
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}
