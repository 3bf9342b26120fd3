// Prometheus metrics of the cloud-routes mode, in the controller's registry.
import { Counter, Gauge, type Registry } from "prom-client";

export class CloudRoutesMetrics {
  readonly writes: Counter<"op">;
  readonly failures: Counter<"cause">;
  readonly retries: Counter<"cause">;
  readonly ownedVips: Gauge;
  readonly foreignRoutes: Gauge;
  readonly unroutableVips: Gauge;
  private lastSync: number | undefined;

  constructor(registry: Registry) {
    const registers = [registry];
    this.writes = new Counter({
      name: "portable_lb_cloud_route_writes_total",
      help: "Route writes this LB pod made in the cloud's route tables (create, replace, delete)",
      labelNames: ["op"],
      registers,
    });
    this.failures = new Counter({
      name: "portable_lb_cloud_route_failures_total",
      help: "Cloud route calls or syncs that failed, by cause (throttled, server, permission, apiserver, identity, ...)",
      labelNames: ["cause"],
      registers,
    });
    this.retries = new Counter({
      name: "portable_lb_cloud_route_retries_total",
      help: "Cloud API calls retried after a failure worth retrying, by cause",
      labelNames: ["cause"],
      registers,
    });
    this.ownedVips = new Gauge({
      name: "portable_lb_cloud_route_owned_vips",
      help: "VIPs whose routes point at this LB pod's instance (held and written)",
      registers,
    });
    this.foreignRoutes = new Gauge({
      name: "portable_lb_cloud_route_foreign_routes",
      help: "Routes for our VIPs that point somewhere not ours: left alone",
      registers,
    });
    this.unroutableVips = new Gauge({
      name: "portable_lb_cloud_route_unroutable_vips",
      help: "VIPs this LB pod should route but cannot: inside the VPC's own range (AWS local route)",
      registers,
    });
    const since = () => this.lastSync;
    new Gauge({
      name: "portable_lb_cloud_route_seconds_since_sync",
      help: "Seconds since the last sync that read and fixed the route tables (-1: none yet)",
      registers,
      collect() {
        const t = since();
        this.set(t === undefined ? -1 : (Date.now() - t) / 1000);
      },
    });
  }

  synced(): void {
    this.lastSync = Date.now();
  }
}
