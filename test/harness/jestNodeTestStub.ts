// Pulumi's closure serializer (a dynamic resource's provider, serialized under `setMocks`) requires
// every built-in module to recognise captured ones, `node:test` among them. Loaded inside a Jest
// worker, node:test's reporter scope stays open: a handle that keeps the worker from exiting and
// that `--detectOpenHandles` reports beside any real leak of ours. No test of ours uses node:test,
// so the serializer gets an empty module in its place.
jest.mock("node:test", () => ({}));
jest.mock("node:test/reporters", () => ({}));
