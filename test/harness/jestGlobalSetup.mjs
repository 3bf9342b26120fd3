// Jest loads global setup outside its module system, where ts-jest's ".ts" -> ".js" import rewrite
// cannot resolve; Node 24 runs the TypeScript harness itself (type stripping) when imported from here.
export { default } from "./jestGlobalSetup.ts";
