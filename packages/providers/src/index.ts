export {
  environmentSchemaWith,
  kubeconfigEnvironmentSchema,
  planEnvironment,
  planFacts,
  resolveEnvironment,
  type Environment,
  type KubeconfigEnvironmentConfig,
  type ProvisioningEnvironmentConfig,
} from "./environment.ts";
export {
  PROVISIONERS,
  SSH_KEY_REQUIRED,
  provisionEnvironment,
  type ClusterNetworks,
  type ClusterProvisioner,
  type ProvisioningSecrets,
} from "./provisionEnvironment.ts";
export { awsEnvironmentSchema, awsPlan, type AwsEnvironmentConfig, type AwsPlan } from "./awsEnvironment.ts";
export { gcpEnvironmentSchema, gcpPlan, type GcpEnvironmentConfig, type GcpPlan } from "./gcpEnvironment.ts";
export { onpremEnvironmentSchema, onpremPlan, type OnpremEnvironmentConfig } from "./onpremEnvironment.ts";
export { cloudNodePlan, type CloudNodePlan, type CloudSubnet } from "./cloudNodePlan.ts";
export {
  CLOUD_DSR_BLOCKED,
  NODE_ROLES,
  lbNodesOf,
  type EnvironmentPlan,
  type NodeFact,
  type NodeRole,
  type ProvisionedEnvironment,
} from "./provider.ts";
export {
  API_SERVER_WAIT_S,
  waitForApiServer,
  type ApiServerReadiness,
  type ApiServerWait,
} from "./apiServer/waitForApiServer.ts";
export { ApiServerReady, type ApiServerReadyArgs } from "./apiServer/apiServerReady.ts";
export { PROBE_TIMEOUT_MS, probeCluster, readKubeconfig, type KubeconfigFile } from "./kubeconfigFile.ts";
export {
  API_SERVER_PORT,
  KUBERNETES_VERSION,
  renderBootstrapScript,
  type BootstrapScriptInput,
  type MachineSettings,
  type ProviderIdSource,
} from "./bootstrap/bootstrapScript.ts";
export { BOOTSTRAP_SCRIPT_PATH, renderCloudInit } from "./bootstrap/cloudInit.ts";
export { caCertHash } from "./bootstrap/caCertHash.ts";
export { metadataGuardRules, metadataGuardUnit } from "./bootstrap/metadataGuard.ts";
export {
  ADMIN_GROUP,
  renderAdminKubeconfig,
  type AdminKubeconfigInput,
} from "./bootstrap/adminKubeconfig.ts";
export { ClusterCredentials, type ClusterCredentialsArgs } from "./bootstrap/clusterCredentials.ts";
export {
  API_PORT_RANGE,
  FLANNEL_VXLAN_PORT,
  clusterPorts,
  ROUTER_PORTS,
  vipPortRanges,
  type PortRange,
} from "./clusterPorts.ts";
export { AwsCluster, type AwsClusterArgs } from "./aws/awsCluster.ts";
export { AwsNetwork, type AwsNetworkArgs } from "./aws/awsNetwork.ts";
export { AwsSecurityGroups, type AwsSecurityGroupsArgs } from "./aws/awsSecurityGroups.ts";
export { EC2_ASSUME_ROLE_POLICY, LbNodeRole, type LbNodeRoleArgs } from "./aws/lbNodeRole.ts";
export { GcpCluster, type GcpClusterArgs } from "./gcp/gcpCluster.ts";
export { COPY_SCRIPT, OnpremCluster, RUN_SCRIPT, type OnpremClusterArgs } from "./onprem/onpremCluster.ts";
export { SSH_PROBE_TIMEOUT_MS, checkSshReachable, unreachableSshHosts } from "./onprem/sshReachability.ts";
export { GcpFirewall, gcpNodeTags, type GcpFirewallArgs } from "./gcp/gcpFirewall.ts";
export { GcpNetwork, type GcpNetworkArgs } from "./gcp/gcpNetwork.ts";
export { GcpNodeIdentity, type GcpNodeIdentityArgs } from "./gcp/gcpNodeIdentity.ts";
