export {
  environmentFromConfig,
  environmentSchema,
  resolveEnvironment,
  type Environment,
  type EnvironmentConfig,
} from "./environment.ts";
