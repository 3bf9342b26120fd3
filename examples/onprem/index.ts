// A platform stack on machines you already have: OnpremCluster logs in to each over SSH and runs
// the shared bootstrap script (kubeadm at the pinned Kubernetes with containerd), then
// PortableCluster runs flannel and the LB on the cluster, peering with your routers. Stack config
// (the README's "Provisioning on your own machines: onprem" says what each key means):
//   pulumi config set --path environment.nodes[0] '{"name":"cp","host":"10.0.0.2","address":"10.0.0.2","role":"control-plane"}'
//   pulumi config set --path environment.nodes[1] '{"name":"lb-1","host":"10.0.0.11","address":"10.0.0.11","role":"lb"}'
//   pulumi config set --path environment.bgp.routers[0] 10.0.0.1
//   pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519
//   pulumi config set network '{"nodeCidr":"10.0.0.0/24","podCidr":"10.244.0.0/16","serviceCidr":"10.96.0.0/16","vipPools":[{"name":"web","cidr":"10.1.1.0/24"}]}'
//   pulumi config set loadBalancer '{"replicas":2,"image":"registry.example.com/portable-lb/lb:0.1.0","bgp":{"asn":64512},"routeReflectors":[{"node":"cp","address":"10.0.0.2"}]}'
//   pulumi config set --secret bgpPassword '...'   # optional
import * as pulumi from "@pulumi/pulumi";
import { PortableCluster, parseOrThrow, type PortableClusterArgs } from "@portable-lb/core";
import { OnpremCluster, checkSshReachable, onpremEnvironmentSchema } from "@portable-lb/providers";

async function main() {
  const config = new pulumi.Config();
  // `kind` is implied: this program provisions onprem only.
  const environment = parseOrThrow(
    onpremEnvironmentSchema,
    { kind: "onprem", ...config.requireObject<object>("environment") },
    "environment",
  );
  // A machine SSH cannot reach is named now, at preview, before anything is planned.
  await checkSshReachable(environment);

  const network = config.requireObject<PortableClusterArgs["network"]>("network");
  const loadBalancer = config.requireObject<PortableClusterArgs["loadBalancer"]>("loadBalancer");
  const bgpPassword = config.getSecret("bgpPassword");
  const machines = new OnpremCluster("onprem", {
    environment,
    network,
    privateKey: config.requireSecret("sshPrivateKey"),
  });
  const cluster = new PortableCluster("platform", {
    environment: machines.environment,
    network,
    loadBalancer: {
      ...loadBalancer,
      ...(loadBalancer.bgp && bgpPassword && { bgp: { ...loadBalancer.bgp, password: bgpPassword } }),
    },
  });

  // App stacks read these through a StackReference (see ../app-stack).
  return cluster.stackOutputs();
}

// Pulumi awaits an exported function and takes what it returns as the stack's outputs: the SSH
// probe must finish before any resource exists.
module.exports = main;
