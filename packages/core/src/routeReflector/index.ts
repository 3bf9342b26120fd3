export { RR_APP_LABEL, RouteReflector, reflectorsSchema, type RouteReflectorArgs } from "./routeReflector.ts";
