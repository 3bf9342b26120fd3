// Renders a kubeconfig with embedded certificates, so the file works wherever it is copied.
import { readFileSync } from "node:fs";

export interface KubeconfigInput {
  server: string;
  caCertFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  user: string;
  context?: string;
}

const b64 = (file: string): string => readFileSync(file).toString("base64");

/** Kubeconfig as JSON, which every client accepts as YAML. */
export function renderKubeconfig(k: KubeconfigInput): string {
  const context = k.context ?? "portable-lb-local";
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: context, cluster: { server: k.server, "certificate-authority-data": b64(k.caCertFile) } },
      ],
      users: [
        {
          name: k.user,
          user: { "client-certificate-data": b64(k.clientCertFile), "client-key-data": b64(k.clientKeyFile) },
        },
      ],
      contexts: [{ name: context, context: { cluster: context, user: k.user } }],
      "current-context": context,
    },
    null,
    2,
  );
}
