// How Prometheus finds the LB pods' and node agents' /metrics: the prometheus.io scrape annotations
// (for a Prometheus that discovers pods by them), or a PodMonitor each (the Prometheus Operator's
// kube-prometheus-stack). Which pods and ports come from the pod specs themselves, not restated.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { LB_HTTP_PATHS } from "../config/lbImage.ts";
import type { MonitoringArgs } from "../config/monitoring.ts";

/** A pod kind whose metrics are scraped: its pods' labels and the named container port. */
export interface ScrapeTarget {
  /** The PodMonitor's name. */
  name: string;
  selector: Record<string, string>;
  portName: string;
}

/** The scrape annotations for a pod whose /metrics is on `port`, or none. */
export function scrapeAnnotations(args: MonitoringArgs | undefined, port: number): Record<string, string> {
  if (!args?.scrapeAnnotations) return {};
  return {
    "prometheus.io/scrape": "true",
    "prometheus.io/port": String(port),
    "prometheus.io/path": LB_HTTP_PATHS.metrics,
  };
}

export interface PodMonitorsArgs {
  namespace: pulumi.Input<string>;
  labels?: Record<string, string>;
  targets: ScrapeTarget[];
}

/** One PodMonitor per scrape target, in the LB namespace. */
export class PodMonitors extends pulumi.ComponentResource {
  public readonly monitors: k8s.apiextensions.CustomResource[];

  constructor(name: string, args: PodMonitorsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:core:PodMonitors", name, {}, opts);
    this.monitors = args.targets.map(
      (t) =>
        new k8s.apiextensions.CustomResource(
          `${name}-${t.name}`,
          {
            apiVersion: "monitoring.coreos.com/v1",
            kind: "PodMonitor",
            metadata: { name: t.name, namespace: args.namespace, labels: { ...t.selector, ...args.labels } },
            spec: {
              selector: { matchLabels: t.selector },
              podMetricsEndpoints: [{ port: t.portName, path: LB_HTTP_PATHS.metrics }],
            },
          },
          { parent: this },
        ),
    );
    this.registerOutputs({});
  }
}
