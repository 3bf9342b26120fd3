// The stand-in node agent's internals, for the tests that look at its state (a separate entry: they
// load @kubernetes/client-node, and the agent is retired once real kubelets run the lab's nodes).
export { REGISTRY_DIR, pathOfRegistryName } from "./mountpoints.ts";
export { hostVethName, podNetnsName } from "./podNetwork.ts";
export { alive, loadRecords, podDirName, podsRoot, type PodRecord } from "./podState.ts";
