export { RR_APP_LABEL, RouteReflector, reflectorsSchema, type RouteReflectorArgs } from "./routeReflector.ts";
export {
  RR_PATHS,
  RR_SERVICE_ACCOUNT,
  routeReflectorPodSpec,
  type RouteReflectorPodSpecInput,
} from "./podSpec.ts";
