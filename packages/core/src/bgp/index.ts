export { renderRouteReflectorBird } from "./routeReflectorBird.ts";
export { renderUpstreamRouterBird } from "./upstreamRouterBird.ts";
export { MULTIPATH_HASH_ADVICE, renderUpstreamRouterFrr } from "./upstreamRouterFrr.ts";
