export { PART_OF, standardLabels } from "./labels.ts";
export { SystemNamespace, type SystemNamespaceArgs, type PodSecurityLevel } from "./systemNamespace.ts";
export { ConfigError, parseOrThrow } from "./validation.ts";
