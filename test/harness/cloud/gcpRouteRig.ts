// The GCP cloud-routes rig: the routes CONTRACT FAKE (gcpRoutesFake.ts) on loopback, which the LB
// pods' processes reach through the official @google-cloud/compute clients, on top of the
// namespace, Nodes (providerID gce://PROJECT/ZONE/POD), Services and processes every cloud's rig
// has (cloudRouteRig.ts). Everything it starts, teardown() ends.
import { waitUntil } from "@portable-lb/lab";
import { CloudRouteRig } from "./cloudRouteRig.ts";
import { GcpRoutesFake } from "./gcpRoutesFake.ts";

export const GCP_PROJECT = "contract-project";
export const GCP_NETWORK = "default";
const ZONE = "europe-west1-b";

export class GcpRouteRig extends CloudRouteRig {
  fake!: GcpRoutesFake;

  /** The pod's instance as routes name their next hop. */
  instanceOf(pod: string): string {
    return `projects/${GCP_PROJECT}/zones/${ZONE}/instances/${pod}`;
  }

  async setup(): Promise<void> {
    this.fake = new GcpRoutesFake({ operationMs: 100 });
    await this.fake.start();
    await this.setupCluster(
      { cloud: "gcp", project: GCP_PROJECT, network: GCP_NETWORK },
      this.o.pods.map((pod) => `gce://${GCP_PROJECT}/${ZONE}/${pod}`),
    );
  }

  start(pod: string, o: { server?: string } = {}): void {
    this.spawn(pod, {}, { ...o, args: ["--gcp-port", String(this.fake.port)] });
  }

  /** The next hops of the routes for `vip`, sorted. */
  nextHops(vip: string): string[] {
    return [...this.fake.routes.values()]
      .filter((r) => r.destRange === `${vip}/32`)
      .map((r) => r.nextHopInstance ?? "")
      .sort();
  }

  /** Waits until each VIP's routes lead to exactly the instances of `live` (and `others`). */
  allRoutedTo(live: string[], vips: string[], ms = 30_000, others: string[] = []): Promise<boolean> {
    const want = JSON.stringify([...live.map((p) => this.instanceOf(p)), ...others].sort());
    return waitUntil(() => vips.every((v) => JSON.stringify(this.nextHops(v)) === want), ms, 50);
  }

  async teardown(): Promise<void> {
    await this.teardownCluster();
    await this.fake?.stop();
  }
}
