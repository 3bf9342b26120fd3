// Which way VIP traffic reaches the LB pods: BGP (ECMP through a route reflector) where the
// environment has peering, else the cloud's route table.
import type { ClusterEnvironment } from "../environment.ts";
import { hasCloudGateway } from "../platform.ts";
import { ConfigError, shown } from "../validation.ts";

export type RoutingChoice = "bgp" | "cloud-routes" | "auto";
export type RoutingMode = Exclude<RoutingChoice, "auto">;

export function resolveRoutingMode(
  choice: RoutingChoice,
  env: Pick<ClusterEnvironment, "platform" | "bgp">,
): RoutingMode {
  const peering = (env.bgp?.routers.length ?? 0) > 0;
  const cloud = hasCloudGateway(env.platform);
  const mode: RoutingMode = choice === "auto" ? (peering || !cloud ? "bgp" : "cloud-routes") : choice;
  if (mode === "bgp" && !peering) {
    throw new ConfigError(
      `environment.bgp.routers: bgp routing needs at least one upstream router to peer with (${shown(env.bgp?.routers)})` +
        (cloud
          ? '; add the routers, or set routing to "cloud-routes"'
          : "; add the router addresses your network team gives you"),
    );
  }
  if (mode === "cloud-routes" && !cloud) {
    throw new ConfigError(
      `routing: cloud-routes needs a cloud route table, which a ${env.platform} environment does not have (got "cloud-routes"); use "bgp" and set environment.bgp.routers`,
    );
  }
  return mode;
}
