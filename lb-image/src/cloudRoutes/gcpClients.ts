// The two @google-cloud/compute clients the GCP loop uses (REST transport), loaded on their own:
// the package's entry loads all of its ~100 clients (~290 MB of memory and a second of CPU at
// import), where these two alone take about half of that. Loaded only in GCP pods.
import type { GlobalOperationsClient, RoutesClient } from "@google-cloud/compute";

export interface GcpClients {
  routes: RoutesClient;
  operations: GlobalOperationsClient;
}

export type GcpClientOptions = NonNullable<ConstructorParameters<typeof RoutesClient>[0]>;

/** The routes and global operations clients; credentials from `opts`, else the instance's account. */
export async function loadGcpClients(opts: GcpClientOptions = {}): Promise<GcpClients> {
  // The package has no exports map: its per-client modules are public paths of its build.
  const [routes, operations] = await Promise.all([
    import("@google-cloud/compute/build/src/v1/routes_client.js"),
    import("@google-cloud/compute/build/src/v1/global_operations_client.js"),
  ]);
  const o = { ...opts, fallback: true };
  return { routes: new routes.RoutesClient(o), operations: new operations.GlobalOperationsClient(o) };
}
