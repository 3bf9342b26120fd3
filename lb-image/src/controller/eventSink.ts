// Problems with users' objects (and the LB pod's own, such as a dropped BGP session) become Kubernetes Events on those objects (what `kubectl describe`
// shows), once per distinct problem: a reconcile loop must not flood the API with repeats.
import type { CoreV1Api } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { SkippedItem } from "./desiredState.ts";

const REPEAT_AFTER_MS = 10 * 60_000;

export class EventSink {
  private readonly api: CoreV1Api;
  private readonly log: Logger;
  private readonly component: string;
  private readonly sent = new Map<string, number>();

  constructor(api: CoreV1Api, log: Logger, component = "portable-lb-controller") {
    this.api = api;
    this.log = log;
    this.component = component;
  }

  /** Logs every problem; sends an Event for each one not reported in the last ten minutes. */
  async report(items: SkippedItem[]): Promise<void> {
    const now = Date.now();
    for (const item of items) {
      const key = `${item.kind}/${item.object}/${item.reason}/${item.message}`;
      if ((this.sent.get(key) ?? 0) > now - REPEAT_AFTER_MS) continue;
      this.sent.set(key, now);
      this.log.warn({ object: item.object, kind: item.kind, reason: item.reason }, item.message);
      const [namespace, name] = item.object.split("/") as [string, string];
      try {
        await this.api.createNamespacedEvent({
          namespace,
          body: {
            metadata: { generateName: `${name}.`, namespace },
            involvedObject: {
              kind: item.kind,
              namespace,
              name,
              apiVersion: item.kind === "EndpointSlice" ? "discovery.k8s.io/v1" : "v1",
            },
            reason: item.reason,
            message: item.message,
            type: "Warning",
            source: { component: this.component },
            firstTimestamp: new Date(now),
            lastTimestamp: new Date(now),
            count: 1,
          },
        });
      } catch (err) {
        // An Event that cannot be sent is only logged: reporting must never stop the data plane.
        this.log.error({ err, object: item.object }, "could not create Event");
      }
    }
  }
}
