export {
  kubeconfigEnvironmentSchema,
  resolveEnvironment,
  type Environment,
  type KubeconfigEnvironmentConfig,
} from "./environment.ts";
export { PROBE_TIMEOUT_MS, probeCluster, readKubeconfig, type KubeconfigFile } from "./kubeconfigFile.ts";
