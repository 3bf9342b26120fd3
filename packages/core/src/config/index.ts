// The config schema shared by the Pulumi components and the LB controller (no Pulumi imports here).
export {
  cidrContains,
  cidrRange,
  cidrSize,
  cidrsOverlap,
  ipv4Address,
  ipv4Cidr,
  ipv4ToNumber,
  isIpv4Address,
  isIpv4Cidr,
  numberToIpv4,
  type Ipv4Range,
} from "./cidr.ts";
export { asn, bfdSchema, bgpTimersSchema, type BfdSettings, type BgpTimerSettings } from "./bgpSettings.ts";
export { autoAssigns, checkPoolsDistinct, vipPoolSchema, type VipPool } from "./vipPool.ts";
export {
  DATA_PLANES,
  FORWARDING_MODES,
  checkForwarding,
  DEFAULT_LOAD_BALANCER_CLASS,
  ROUTING_MODES,
  SCHEDULERS,
  lbBgpSchema,
  lbCloudRoutesSchema,
  lbCloudRoutesSchemaRouteTablesLater,
  lbConfigSchema,
  lbConfigSchemaRouteTablesLater,
  usesFastPath,
  type LbConfig,
  type LbConfigInput,
} from "./lbConfig.ts";
export {
  ANNOUNCE_ANNOTATION,
  FINALIZER_OWNER_ANNOTATION,
  HANDOVER_ACCEPT_FROM_ANNOTATION,
  HANDOVER_FROM_ANNOTATION,
  HANDOVER_RELAY_ANNOTATION,
  HANDOVER_RELAYS,
  REQUESTED_VIPS_ANNOTATION,
  VIP_POOL_ANNOTATION,
} from "./annotations.ts";
export { HEALTH_CHECK_ANNOTATION, parseHealthCheck, type HealthCheckSpec } from "./healthCheck.ts";
export {
  SOURCE_RANGES_ANNOTATION,
  SOURCE_RANGES_FIELD,
  formatIpv4Range,
  isSourceRange,
  readSourceRanges,
  type SourceRangesRead,
} from "./sourceRanges.ts";
export {
  ANNOUNCEMENT_LEASE,
  BIRD_RUN_FILES,
  CONTROLLER_MEMORY,
  LB_APP_LABEL,
  FAST_PATH_LOADER,
  LB_COMMANDS,
  LB_ENV,
  LB_HTTP_PATHS,
  LB_PATHS,
  LB_POD_LABELS,
  LB_STOP_TIMEOUTS,
} from "./lbImage.ts";
export { LB_IMAGE_FIX, lbImageRef } from "./lbImageRef.ts";
export { imageRepositorySchema } from "./imageRepository.ts";
export { INSTANCE_METADATA_ADDRESS, METADATA_GUARD } from "./metadataGuard.ts";
