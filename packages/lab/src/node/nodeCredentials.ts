// A lab node's identities from the control plane's CA: the kubelet as system:node:<name> in
// system:nodes (so the Node authorizer limits it to its own Node and pods) and kube-proxy as
// system:kube-proxy (bound to system:node-proxier by the default RBAC).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { issueClientCert } from "../controlPlane/certificates.ts";
import { renderKubeconfig } from "../controlPlane/kubeconfig.ts";
import type { NodeLayout } from "./nodeLayout.ts";

export interface NodeCredentialsInput {
  layout: NodeLayout;
  /** The control plane's PKI folder (ca.crt, ca.key). */
  pkiDir: string;
  /** The API server's URL as the node reaches it. */
  server: string;
}

/** Issues both certificates and writes the node's two kubeconfigs (mode 0600). */
export async function writeNodeCredentials({ layout, pkiDir, server }: NodeCredentialsInput): Promise<void> {
  const identities = [
    {
      file: layout.kubeletKubeconfig,
      name: `node-${layout.name}`,
      user: `system:node:${layout.name}`,
      groups: ["system:nodes"],
    },
    {
      file: layout.kubeProxyKubeconfig,
      name: `kube-proxy-${layout.name}`,
      user: "system:kube-proxy",
      groups: [],
    },
  ];
  for (const { file, ...identity } of identities) {
    const cert = await issueClientCert(pkiDir, identity);
    const kubeconfig = renderKubeconfig({
      server,
      caCertFile: join(pkiDir, "ca.crt"),
      clientCertFile: cert.cert,
      clientKeyFile: cert.key,
      user: identity.user,
    });
    writeFileSync(file, kubeconfig, { mode: 0o600 });
  }
}
