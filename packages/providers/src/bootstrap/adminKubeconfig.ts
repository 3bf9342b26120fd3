// The admin kubeconfig, from the CA and the admin client certificate Pulumi made: known without
// logging in to the control plane. Its user is in kubeadm:cluster-admins, which kubeadm binds to
// cluster-admin (not system:masters, which no RBAC change can take back).
export const ADMIN_GROUP = "kubeadm:cluster-admins";

export interface AdminKubeconfigInput {
  clusterName: string;
  /** https://HOST:PORT of the API server as seen from where pulumi and kubectl run. */
  server: string;
  caCertPem: string;
  clientCertPem: string;
  clientKeyPem: string;
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

export function renderAdminKubeconfig(i: AdminKubeconfigInput): string {
  const user = `${i.clusterName}-admin`;
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `  - name: ${i.clusterName}`,
    "    cluster:",
    `      server: ${i.server}`,
    `      certificate-authority-data: ${b64(i.caCertPem)}`,
    "users:",
    `  - name: ${user}`,
    "    user:",
    `      client-certificate-data: ${b64(i.clientCertPem)}`,
    `      client-key-data: ${b64(i.clientKeyPem)}`,
    "contexts:",
    `  - name: ${i.clusterName}`,
    "    context:",
    `      cluster: ${i.clusterName}`,
    `      user: ${user}`,
    `current-context: ${i.clusterName}`,
    "",
  ].join("\n");
}
