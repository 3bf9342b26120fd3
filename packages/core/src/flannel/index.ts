export {
  Flannel,
  FLANNEL_CNI_PLUGIN_VERSION,
  FLANNEL_VERSION,
  type FlannelArgs,
  type FlannelImages,
} from "./flannel.ts";
export {
  flannelBackendConf,
  defaultFlannelBackend,
  FLANNEL_BACKENDS,
  netConf,
  resolveFlannelBackend,
  type FlannelBackend,
  type FlannelNetConf,
  type VxlanOptions,
} from "./flannelBackend.ts";
