// The GCP side, through @google-cloud/compute (REST transport): lists this group's routes, inserts
// and deletes routes, waiting for each long-running operation to finish; each call retried on
// throttling and 5xx (retryPolicy.ts). Credentials come from the instance's service account (the
// client's default chain asks the metadata server).
import type { GlobalOperationsClient, RoutesClient } from "@google-cloud/compute";
import type { CloudCallError } from "./failureCause.ts";
import { failureCause } from "./failureCause.ts";
import { gcpRouteDescription, gcpRouteName, ownedRoute, type OwnedRoute } from "./gcpRoutePlan.ts";
import { withRetry, type RetryPolicy } from "./retryPolicy.ts";

/** A route for one of our VIPs that is not ours (not marked as this group's). */
export interface ForeignRoute {
  name: string;
  vip: string;
  target: string;
}

export interface GcpRoutesOptions {
  routes: RoutesClient;
  operations: GlobalOperationsClient;
  project: string;
  network: string;
  group: string;
  /** Whether a /32 destination is one of our VIPs (inside a VIP pool). */
  isVip: (ip: string) => boolean;
  /** All our routes share one priority, so GCP spreads flows over them (ECMP). */
  priority?: number;
  retry?: RetryPolicy;
  onRetry?: (err: CloudCallError) => void;
  onWrite?: (op: "create" | "delete") => void;
}

const WAIT_DEADLINE_MS = 60_000;

/** The operation an insert or delete started (the client puts its numeric id in `name`). */
function operationName(op: { name?: string | null; latestResponse?: unknown }): string {
  return (op.latestResponse as { name?: string } | undefined)?.name ?? op.name ?? "";
}

export class GcpRoutes {
  private readonly o: GcpRoutesOptions;

  constructor(o: GcpRoutesOptions) {
    this.o = o;
  }

  network(): string {
    return this.o.network;
  }

  private resource(name?: string): string {
    return `projects/${this.o.project}/global/routes${name ? `/${name}` : ""}`;
  }

  private call<T>(action: string, resource: string, fn: () => Promise<T>): Promise<T> {
    return withRetry(`compute.${action}`, resource, fn, {
      ...(this.o.retry && { policy: this.o.retry }),
      ...(this.o.onRetry && { onRetry: this.o.onRetry }),
    });
  }

  /** Waits until a global operation is DONE (GlobalOperations.wait returns at the latest after ~2 min). */
  private async wait(operation: string): Promise<void> {
    const deadline = Date.now() + WAIT_DEADLINE_MS;
    for (;;) {
      const [op] = await this.call(
        "globalOperations.get",
        `projects/${this.o.project}/global/operations/${operation}`,
        () => this.o.operations.wait({ project: this.o.project, operation }),
      );
      if (op.error?.errors?.length)
        throw new Error(`operation ${operation} failed: ${JSON.stringify(op.error.errors)}`);
      if (String(op.status) === "DONE") return;
      if (Date.now() > deadline)
        throw new Error(`operation ${operation} not done after ${WAIT_DEADLINE_MS / 1000} s`);
    }
  }

  /**
   * This group's routes in the project, and the others' routes in the network for our VIPs (never
   * touched, only reported: at the same priority they share the VIP's traffic, at a better one they
   * take it all).
   */
  async list(): Promise<{ owned: OwnedRoute[]; foreign: ForeignRoute[] }> {
    const [routes] = await this.call("routes.list", this.resource(), () =>
      this.o.routes.list({ project: this.o.project }, { autoPaginate: true }),
    );
    const owned: OwnedRoute[] = [];
    const foreign: ForeignRoute[] = [];
    const network = `/global/networks/${this.o.network}`;
    for (const r of routes) {
      const ours = ownedRoute(this.o.group, r);
      if (ours) owned.push(ours);
      else if (r.destRange?.endsWith("/32") && r.network?.endsWith(network)) {
        const vip = r.destRange.slice(0, -3);
        const target = r.nextHopInstance ?? r.nextHopIp ?? r.nextHopGateway ?? r.nextHopIlb ?? "other";
        if (this.o.isVip(vip)) foreign.push({ name: r.name ?? "", vip, target });
      }
    }
    return { owned, foreign };
  }

  /** Inserts VIP/32 to `instance` and waits for it; one that already exists counts as done. */
  async insert(vip: string, instance: string): Promise<void> {
    const name = gcpRouteName(this.o.group, vip, instance);
    try {
      const [op] = await this.call("routes.create", this.resource(name), () =>
        this.o.routes.insert({
          project: this.o.project,
          routeResource: {
            name,
            destRange: `${vip}/32`,
            priority: this.o.priority ?? 1000,
            network: `projects/${this.o.project}/global/networks/${this.o.network}`,
            nextHopInstance: instance,
            description: gcpRouteDescription(this.o.group, vip, instance),
          },
        }),
      );
      await this.wait(operationName(op));
      this.o.onWrite?.("create");
    } catch (err) {
      if ((err as CloudCallError).reason !== "conflict" && failureCause(err) !== "conflict") throw err;
    }
  }

  /** Deletes one of our routes and waits for it; one already gone counts as done. */
  async delete(route: OwnedRoute): Promise<void> {
    try {
      const [op] = await this.call("routes.delete", this.resource(route.name), () =>
        this.o.routes.delete({ project: this.o.project, route: route.name }),
      );
      await this.wait(operationName(op));
      this.o.onWrite?.("delete");
    } catch (err) {
      if ((err as CloudCallError).reason !== "not-found") throw err;
    }
  }
}
