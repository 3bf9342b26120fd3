// Pulumi's closure serializer (a dynamic resource's provider, serialized under `setMocks`) requires
// every built-in module to recognise captured ones, `node:test` among them. Loaded inside a Jest
// worker, node:test's reporter scope stays open, and Jest then reports "a worker process has failed
// to exit gracefully" at the end of every run, which would hide a real leaked handle. No test of
// ours uses node:test, so the serializer gets an empty module in its place.
jest.mock("node:test", () => ({}));
jest.mock("node:test/reporters", () => ({}));
