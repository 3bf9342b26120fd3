// Prometheus metrics of the controller (served on /metrics).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { VipCounter } from "../dataplane/model.ts";

export class ControllerMetrics {
  readonly registry = new Registry();
  readonly reconcileSeconds = new Histogram({
    name: "portable_lb_reconcile_duration_seconds",
    help: "Time from a Kubernetes change to rules applied in the kernel",
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: "portable_lb_reconcile_errors_total",
    help: "Reconciles that failed (the last good rules stay in place)",
    registers: [this.registry],
  });
  readonly ruleChanges = new Counter({
    name: "portable_lb_rule_changes_total",
    help: "Data-plane statements applied",
    labelNames: ["engine"],
    registers: [this.registry],
  });
  readonly dataPlaneEngine = new Gauge({
    name: "portable_lb_dataplane_engine",
    help: "The data-plane engine in use (1) and why it was chosen (forced, ipvs, no-ipvs, ipvs-cannot-masquerade)",
    labelNames: ["engine", "reason"],
    registers: [this.registry],
  });
  readonly services = new Gauge({
    name: "portable_lb_virtual_services",
    help: "VIP:port services programmed",
    registers: [this.registry],
  });
  readonly backends = new Gauge({
    name: "portable_lb_backends",
    help: "Backends programmed, draining included",
    registers: [this.registry],
  });
  readonly vips = new Gauge({
    name: "portable_lb_vips",
    help: "VIPs served by this LB pod",
    registers: [this.registry],
  });
  readonly skipped = new Counter({
    name: "portable_lb_skipped_total",
    help: "Objects or parts left out because of bad input",
    labelNames: ["reason"],
    registers: [this.registry],
  });
  readonly dsrFallbackPorts = new Gauge({
    name: "portable_lb_dsr_fallback_ports",
    help: "Service ports asked to be served by direct server return and served by SNAT, by reason (the Event's)",
    labelNames: ["reason"],
    registers: [this.registry],
  });
  readonly statusWriteErrors = new Counter({
    name: "portable_lb_status_write_errors_total",
    help: "VIP allocations that could not be written into a Service's status (retried)",
    registers: [this.registry],
  });
  readonly staleUdpFlowsFlushed = new Counter({
    name: "portable_lb_stale_udp_flows_flushed_total",
    help: "Service-backend pairs whose UDP conntrack entries were deleted once the backend left (SNAT)",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: "portable_lb_allocator_leader",
    help: "1 while this pod is the VIP allocator",
    registers: [this.registry],
  });
  readonly apiConnected = new Gauge({
    name: "portable_lb_api_connected",
    help: "1 while the watches on the API server are up (0: serving the last known state)",
    registers: [this.registry],
  });

  readonly driftFound = new Counter({
    name: "portable_lb_drift_found_total",
    help: "Differences found by reading the data plane back from the kernel, by kind",
    labelNames: ["kind"],
    registers: [this.registry],
  });
  readonly driftRepaired = new Counter({
    name: "portable_lb_drift_repaired_total",
    help: "Differences repaired (read back as applied afterwards), by kind",
    labelNames: ["kind"],
    registers: [this.registry],
  });
  readonly verifyErrors = new Counter({
    name: "portable_lb_verify_errors_total",
    help: "Read-backs or repairs of the data plane that failed (its VIPs stay unverified)",
    registers: [this.registry],
  });
  readonly verifySeconds = new Histogram({
    name: "portable_lb_verify_duration_seconds",
    help: "Time to read the data plane back from the kernel (and repair it), by mode",
    labelNames: ["mode"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly lastVerification = new Gauge({
    name: "portable_lb_last_verification_timestamp_seconds",
    help: "When the data plane was last read back and found as applied (Unix time)",
    registers: [this.registry],
  });
  readonly vipsHeldBack = new Gauge({
    name: "portable_lb_vips_held_back",
    help: 'VIPs this LB pod serves but does not announce (BGP) or route (cloud routes), by reason: AnnounceDisabled (the Service\'s portable-lb.io/announce is "false"), NoReadyBackend (no backend takes new flows)',
    labelNames: ["reason"],
    registers: [this.registry],
  });
  readonly verifiedVips = new Gauge({
    name: "portable_lb_verified_vips",
    help: "VIPs whose every service and local route are read back from the kernel as applied",
    registers: [this.registry],
  });

  readonly counterReadErrors = new Counter({
    name: "portable_lb_counter_read_errors_total",
    help: "Scrapes that could not read the kernel's per-VIP counters",
    registers: [this.registry],
  });
  readonly healthChecks = new Counter({
    name: "portable_lb_health_checks_total",
    help: "Active health checks of backends, by result",
    labelNames: ["result"],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /**
   * Connections per VIP:port from the kernel's counters, read once per scrape. A failed read is
   * counted and the scrape goes on without these series.
   */
  observeVipConnections(read: () => Promise<VipCounter[]>): void {
    const errors = this.counterReadErrors;
    new Counter({
      name: "portable_lb_vip_connections_total",
      help: "Connections each VIP:port has taken since its rules were made (kernel counters)",
      labelNames: ["vip", "port", "protocol"],
      registers: [this.registry],
      async collect() {
        this.reset();
        try {
          for (const c of await read())
            this.inc({ vip: c.vip, port: String(c.port), protocol: c.protocol }, c.connections);
        } catch {
          errors.inc();
        }
      },
    });
  }

  /** Backends failing their active checks, read at scrape time. */
  observeUnhealthy(count: () => number): void {
    new Gauge({
      name: "portable_lb_backends_unhealthy",
      help: "Backends failing their active health checks (drained: weight 0)",
      registers: [this.registry],
      collect() {
        this.set(count());
      },
    });
  }
}
