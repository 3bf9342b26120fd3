// The stand-in node agent's internals, for the tests that run its pieces on their own (a separate
// entry: they load @kubernetes/client-node, and the agent is retired once real kubelets run).
export { isExecutable, launchScript, resolveCommand, type MountSpec } from "./containerLaunch.ts";
export { execInContainerArgs } from "./containerProcess.ts";
export { containerSpec, podHostname, podHostsFile } from "./containerSpec.ts";
export { findTools } from "./labAgent.ts";
export { REGISTRY_DIR, pathOfRegistryName, removeUnusedMountpoints } from "./mountpoints.ts";
export type { PodRuntimeFields } from "./podEnv.ts";
export { hostVethName, podNetnsName } from "./podNetwork.ts";
export { alive, containerFiles, loadRecords, podDirName, podsRoot, type PodRecord } from "./podState.ts";
export { prepareVolumes, type PreparedVolume } from "./podVolumes.ts";
export { runHandler, type HandlerResult } from "./probes.ts";
export { processSecurity, type ProcessSecurity } from "./securityContext.ts";
