// Three projects: fast unit tests beside the code; integration tests under test/integration that
// share one local control plane per run (started in globalSetup, stopped in globalTeardown); and the
// end-to-end tests under test/e2e, which scripts/test.sh runs after the others (a booting lab takes
// both CPUs, and the BGP timing tests must not share them with it).
const transform = { "^.+\\.ts$": ["ts-jest", { tsconfig: "<rootDir>/tsconfig.json" }] };
const moduleNameMapper = {
  // tsc rewrites our relative ".ts" imports to ".js" (rewriteRelativeImportExtensions); map them back.
  "^(\\.{1,2}/.*)\\.js$": "$1",
  "^@portable-lb/(core|providers|lab)$": "<rootDir>/packages/$1/src/index.ts",
  "^@portable-lb/core/(config|bgp)$": "<rootDir>/packages/core/src/$1/index.ts",
  "^@portable-lb/lb-image$": "<rootDir>/lb-image/src/index.ts",
};

// Every project: Pulumi's closure serializer must not leave node:test open in a worker.
const nodeTestStub = "<rootDir>/test/harness/jestNodeTestStub.ts";

const sharedControlPlane = {
  globalSetup: "<rootDir>/test/harness/jestGlobalSetup.mjs",
  globalTeardown: "<rootDir>/test/harness/jestGlobalTeardown.mjs",
  setupFilesAfterEnv: ["<rootDir>/test/harness/jestIntegrationSetup.ts", nodeTestStub],
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      displayName: "unit",
      testEnvironment: "node",
      setupFilesAfterEnv: [nodeTestStub],
      transform,
      moduleNameMapper,
      testMatch: [
        "<rootDir>/packages/*/src/**/*.test.ts",
        "<rootDir>/lb-image/src/**/*.test.ts",
        "<rootDir>/lb-image/image/**/*.test.ts",
        "<rootDir>/test/harness/**/*.test.ts",
        "<rootDir>/bench/lib/**/*.test.ts",
        // The root program's own modules (stackInput.ts).
        "<rootDir>/*.test.ts",
        // The example programs' graphs (their previews), under mocks.
        "<rootDir>/examples/**/*.test.ts",
      ],
    },
    {
      displayName: "integration",
      testEnvironment: "node",
      transform,
      moduleNameMapper,
      testMatch: ["<rootDir>/test/integration/**/*.test.ts"],
      ...sharedControlPlane,
    },
    {
      displayName: "e2e",
      testEnvironment: "node",
      transform,
      moduleNameMapper,
      testMatch: ["<rootDir>/test/e2e/**/*.test.ts"],
      ...sharedControlPlane,
    },
  ],
};
