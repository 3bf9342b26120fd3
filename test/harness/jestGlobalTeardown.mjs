// See jestGlobalSetup.mjs.
export { default } from "./jestGlobalTeardown.ts";
