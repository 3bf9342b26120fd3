// How Prometheus is to find the metrics (the LoadBalancer's monitoring settings); Pulumi-free, as
// the cluster's input checks load it.
import { z } from "zod";

export const monitoringSchema = z
  .strictObject({
    /** prometheus.io/scrape, /port and /path on the LB pods and node agents. */
    scrapeAnnotations: z.boolean().optional(),
    /**
     * A monitoring.coreos.com/v1 PodMonitor for each (the Prometheus Operator's CRDs must be in the
     * cluster), labelled with `podMonitorLabels` (kube-prometheus-stack selects `release: <its name>`
     * by default).
     */
    podMonitors: z.boolean().optional(),
    podMonitorLabels: z.record(z.string(), z.string()).optional(),
  })
  .superRefine((m, ctx) => {
    if (m.podMonitorLabels && !m.podMonitors)
      ctx.addIssue({
        code: "custom",
        path: ["podMonitorLabels"],
        message: "labels PodMonitors, but podMonitors is not true; set podMonitors: true or drop the labels",
      });
  });
export type MonitoringArgs = z.input<typeof monitoringSchema>;
