// BGP configuration renderers. Pulumi-free: the LB controller (lb-image) imports this as @portable-lb/core/bgp.
export { renderRouteReflectorBird } from "./routeReflectorBird.ts";
export { renderUpstreamRouterBird } from "./upstreamRouterBird.ts";
export { renderUpstreamRouterFrr, routerAdvice } from "./upstreamRouterFrr.ts";
export { renderSpeakerBird } from "./speakerBird.ts";
export type {
  BfdTimers,
  BgpTimers,
  RouteReflectorConfigInput,
  SpeakerConfigInput,
  UpstreamRouterConfigInput,
} from "./types.ts";
