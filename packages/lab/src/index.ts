// @portable-lb/lab: the whole system on this machine. The `lab` environment and the demo app as
// Pulumi resources, and the pieces they are made of, which the tests and benchmarks drive directly:
// the control plane, node namespaces (real Kubernetes nodes), the router and the lab's client.
export { Lab, type LabArgs } from "./lab.ts";
export { builtLbImage } from "./builtLbImage.ts";
export {
  LAB_ROLE_LABEL,
  labEnvironmentSchema,
  labPlan,
  type LabEnvironmentConfig,
  type LabNodePlan,
  type LabPlan,
} from "./labPlan.ts";
export { DEMO_PORT, DemoWebApp, type DemoWebAppArgs } from "./demoWebApp.ts";
export {
  environmentFromConfig,
  environmentSchema,
  type EnvironmentConfig,
  type StackEnvironment,
} from "./stackEnvironment.ts";
export { curlSpread, routerNextHops, type RequestPath, type Spread } from "./labReport.ts";
export { controlPlaneDir, labDir, labNamespace } from "./ops/fabric.ts";
export { layoutOf as labNodeLayout } from "./ops/node.ts";
export {
  instancesRoot,
  killControlPlaneNow,
  reapStale,
  startControlPlane,
  stopControlPlane,
  type ControlPlaneState,
} from "./controlPlane/controlPlane.ts";
export { issueClientCert, makePki } from "./controlPlane/certificates.ts";
export { renderKubeconfig } from "./controlPlane/kubeconfig.ts";
export {
  isLabId,
  NetnsError,
  NetnsLab,
  addressOf,
  execCommand,
  labsRoot,
  reapStaleLabs,
  stopRecorded,
  type Bridge,
  type ExecResult,
  type LabNamespace,
  type LabProcess,
  type ProcessRecord,
} from "./netns/netnsLab.ts";
export { FrrRouter, parseNextHops } from "./netns/frrRouter.ts";
export {
  commandLine,
  findByMarker,
  killNow,
  lastLines,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
} from "./processes.ts";
export { freePort } from "./ports.ts";
export { CLOCK_TICKS_PER_SECOND, parseProcStat, type ProcStat } from "./procStat.ts";
// Real nodes: containerd, runc, the kubelet and kube-proxy in a node namespace.
export { KubeletNode, KubeletNodeError, type KubeletNodeSpec, type NodeProcess } from "./node/kubeletNode.ts";
export { nodeLayout, NodeLayoutError, type NodeLayout } from "./node/nodeLayout.ts";
export { writeNodeCredentials } from "./node/nodeCredentials.ts";
export {
  cgroupPids,
  createCgroupRoot,
  nodeCgroupRoot,
  reapStaleNodeCgroups,
  removeCgroupRoot,
} from "./node/nodeCgroups.ts";
export {
  KUBELET_KERNEL_SETTINGS,
  MOUNT_NAMESPACE_HOLDER,
  enterNode,
  prepareMountNamespace,
} from "./node/nodeMountNamespace.ts";
export { cniTemplate, containerdConfig } from "./node/containerdConfig.ts";
export { kubeletConfig } from "./node/kubeletConfig.ts";
export {
  CONTROL_PLANE_IMAGE_NAMES,
  CONTROL_PLANE_IMAGE_REPOSITORY,
  controlPlaneImages,
  labImage,
  labNodeImages,
  type ControlPlaneImageName,
  type LabImage,
  type LabImageName,
} from "./node/labImages.ts";
export type { Taint } from "./node/kubeletConfig.ts";
export { kubeProxyConfig } from "./node/kubeProxyConfig.ts";
