export {
  environmentFromConfig,
  environmentSchema,
  resolveEnvironment,
  type Environment,
  type EnvironmentConfig,
} from "./environment.ts";
export { Lab, type LabArgs } from "./lab/lab.ts";
export {
  LAB_ROLE_LABEL,
  labEnvironmentSchema,
  labPlan,
  type LabEnvironmentConfig,
  type LabNodePlan,
  type LabPlan,
} from "./lab/labPlan.ts";
export { DemoWebApp, type DemoWebAppArgs } from "./lab/demoWebApp.ts";
