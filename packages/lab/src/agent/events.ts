// Events on pods, as `kubectl describe pod` shows the kubelet's (Started, Killing, Unhealthy, BackOff,
// FailedMount, …). A repeat of the same event on the same pod bumps the count of the one already
// written instead of adding another, like client-go's event aggregation. Never throws: an event
// that cannot be written is only logged.
import type { CoreV1Api, CoreV1Event } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiTime } from "./podStatus.ts";
import { MERGE_PATCH } from "./kubeApi.ts";

export interface EventTarget {
  namespace: string;
  name: string;
  uid: string;
  /** e.g. spec.containers{web} */
  fieldPath?: string;
}

export type EventType = "Normal" | "Warning";

export class EventRecorder {
  readonly #core: CoreV1Api;
  readonly #log: Logger;
  readonly #component: string;
  readonly #host: string;
  readonly #seen = new Map<string, { name: string; count: number }>();

  constructor(core: CoreV1Api, log: Logger, host: string) {
    this.#core = core;
    this.#log = log;
    this.#component = "lab-agent";
    this.#host = host;
  }

  record(target: EventTarget, type: EventType, reason: string, message: string): void {
    void this.#write(target, type, reason, message);
  }

  /** Forgets the pod's events (it is gone). */
  forget(uid: string): void {
    for (const k of this.#seen.keys()) if (k.startsWith(`${uid}/`)) this.#seen.delete(k);
  }

  async #write(target: EventTarget, type: EventType, reason: string, message: string): Promise<void> {
    const key = `${target.uid}/${target.fieldPath ?? ""}/${type}/${reason}/${message}`;
    const now = apiTime();
    const seen = this.#seen.get(key);
    try {
      if (seen) {
        seen.count++;
        await this.#core.patchNamespacedEvent(
          { name: seen.name, namespace: target.namespace, body: { count: seen.count, lastTimestamp: now } },
          MERGE_PATCH,
        );
        return;
      }
      const name = `${target.name}.${Date.now().toString(16)}${Math.random().toString(16).slice(2, 6)}`;
      this.#seen.set(key, { name, count: 1 });
      const body = {
        metadata: { name, namespace: target.namespace },
        involvedObject: {
          apiVersion: "v1",
          kind: "Pod",
          namespace: target.namespace,
          name: target.name,
          uid: target.uid,
          ...(target.fieldPath && { fieldPath: target.fieldPath }),
        },
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: this.#component, host: this.#host },
        reportingComponent: this.#component,
        reportingInstance: this.#host,
      } as unknown as CoreV1Event;
      await this.#core.createNamespacedEvent({ namespace: target.namespace, body });
    } catch (err) {
      // The pod's namespace may be going away with it; an event is never worth failing for.
      this.#seen.delete(key);
      this.#log.debug({ err, reason, pod: `${target.namespace}/${target.name}` }, "event not written");
    }
  }
}
