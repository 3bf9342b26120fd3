// What joining nodes pin the control plane by: "sha256:" and the hex SHA-256 of the CA certificate's
// DER SubjectPublicKeyInfo, as `kubeadm join --discovery-token-ca-cert-hash` takes it.
import { createHash, X509Certificate } from "node:crypto";

export function caCertHash(caCertPem: string): string {
  const spki = new X509Certificate(caCertPem).publicKey.export({ type: "spki", format: "der" });
  return `sha256:${createHash("sha256").update(spki).digest("hex")}`;
}
