// What the tls and random providers would return under Pulumi's mocks: the throwaway fixture CA
// stands in for every certificate and key, and the token's parts are fixed; and the scripts made with them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { NodeFact } from "../../provider.ts";
import { renderBootstrapScript, type BootstrapScriptInput } from "../bootstrapScript.ts";
import { caCertHash } from "../caCertHash.ts";

export const TEST_CA_CERT = readFileSync(join(__dirname, "test-ca.crt"), "utf8");
export const TEST_CA_KEY = readFileSync(join(__dirname, "test-ca.key"), "utf8");
export const TEST_JOIN_TOKEN = "abc123.0123456789abcdef";

const outputs: Record<string, Record<string, unknown>> = {
  "tls:index/privateKey:PrivateKey": { privateKeyPem: TEST_CA_KEY },
  "tls:index/selfSignedCert:SelfSignedCert": { certPem: TEST_CA_CERT },
  "tls:index/certRequest:CertRequest": { certRequestPem: "csr" },
  "tls:index/locallySignedCert:LocallySignedCert": { certPem: TEST_CA_CERT },
  "random:index/randomString:RandomString": { result: TEST_JOIN_TOKEN.split(".")[0] },
  "random:index/randomPassword:RandomPassword": { result: TEST_JOIN_TOKEN.split(".")[1] },
  "random:index/randomId:RandomId": { hex: "0a1b2c3d" },
};

export function credentialOutputs(type: string): Record<string, unknown> | undefined {
  return outputs[type];
}

/**
 * The script the shared renderer gives `node` of cluster "plb" made with these credentials: what a
 * provider's graph test expects each machine to run.
 */
export function testCredentialsScript(
  node: NodeFact,
  cluster: Pick<BootstrapScriptInput, "controlPlaneAddress" | "apiServerCertSans" | "providerId" | "machines"> & {
    network: { podCidr: string; serviceCidr: string };
    lbTaint?: boolean;
  },
): string {
  return renderBootstrapScript({
    clusterName: "plb",
    node: { name: node.name, role: node.role, address: node.address },
    ...(cluster.providerId && { providerId: cluster.providerId }),
    controlPlaneAddress: cluster.controlPlaneAddress,
    apiServerCertSans: cluster.apiServerCertSans,
    podCidr: cluster.network.podCidr,
    serviceCidr: cluster.network.serviceCidr,
    joinToken: TEST_JOIN_TOKEN,
    caCertHash: caCertHash(TEST_CA_CERT),
    ...(node.role === "control-plane" && { ca: { certPem: TEST_CA_CERT, keyPem: TEST_CA_KEY } }),
    lbTaint: cluster.lbTaint ?? false,
    ...(cluster.machines && { machines: cluster.machines }),
  });
}
