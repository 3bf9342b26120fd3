// What the controller tells users about their objects (and the LB pod's own, such as a dropped BGP
// session) becomes Kubernetes Events on those objects: Warnings for problems, Normal ones for what
// it did (a VIP allocated or moved). Each carries the object's uid, without which
// `kubectl describe` does not show it. A distinct Event is sent once per ten minutes: a reconcile
// loop must not flood the API with repeats (a change of state, told once when it happens, may ask
// to be sent each time).
import type { CoreV1Api } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { SkippedItem } from "./desiredState.ts";

export type EventType = "Normal" | "Warning";
export interface ReportOptions {
  /** Sent even when the same Event went out in the last ten minutes (each is a change, told once). */
  repeat?: boolean;
}

const REPEAT_AFTER_MS = 10 * 60_000;
const API_VERSION: Record<SkippedItem["kind"], string> = {
  Service: "v1",
  Pod: "v1",
  EndpointSlice: "discovery.k8s.io/v1",
};

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

  /** Logs every item; sends an Event for each one not sent in the last ten minutes. */
  async report(items: SkippedItem[], type: EventType = "Warning", opts: ReportOptions = {}): Promise<void> {
    const now = Date.now();
    this.forgetBefore(now - REPEAT_AFTER_MS);
    for (const item of items) {
      // The uid is part of it: a Service deleted and created again is told again.
      const key = `${type}/${item.kind}/${item.object}/${item.uid ?? ""}/${item.reason}/${item.message}`;
      if (this.sent.has(key) && !opts.repeat) continue;
      this.sent.delete(key);
      this.sent.set(key, now);
      this.log[type === "Warning" ? "warn" : "info"](
        { object: item.object, kind: item.kind, reason: item.reason },
        item.message,
      );
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
              apiVersion: API_VERSION[item.kind],
              ...(item.uid && { uid: item.uid }),
            },
            reason: item.reason,
            message: item.message,
            type,
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

  /**
   * Keeps the memory of sent Events to the last ten minutes (Services come and go by thousands).
   * A key is (re)inserted when sent, so the map is in time order and the scan stops at the first
   * recent one.
   */
  private forgetBefore(t: number): void {
    for (const [key, at] of this.sent) {
      if (at > t) break;
      this.sent.delete(key);
    }
  }
}
