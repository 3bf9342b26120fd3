export {
  kubeconfigEnvironmentSchema,
  resolveEnvironment,
  type Environment,
  type KubeconfigEnvironmentConfig,
} from "./environment.ts";
