// The cluster's credentials under Pulumi's mocks: the resources and the inputs that decide what the
// cluster trusts (a CA, an admin in kubeadm:cluster-admins, a token in kubeadm's format), the CA hash
// as openssl computes it, and a kubeconfig the Kubernetes client loads.
import { execSync } from "node:child_process";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import * as pulumi from "@pulumi/pulumi";
import { installMocks, settled, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import {
  TEST_CA_CERT,
  TEST_CA_KEY,
  TEST_JOIN_TOKEN,
  credentialOutputs,
} from "./__fixtures__/testCredentials.ts";
import { caCertHash } from "./caCertHash.ts";
import { ClusterCredentials } from "./clusterCredentials.ts";

const FIXTURES = join(__dirname, "__fixtures__");
const caCert = TEST_CA_CERT;
const caKey = TEST_CA_KEY;
const recorded = installMocks({ outputs: credentialOutputs });

describe("caCertHash", () => {
  it("is sha256 of the CA's public key, as kubeadm and openssl compute it", () => {
    const openssl = execSync(
      `openssl x509 -in ${join(FIXTURES, "test-ca.crt")} -pubkey -noout | openssl pkey -pubin -outform der | sha256sum`,
      { encoding: "utf8" },
    ).split(" ")[0];
    expect(caCertHash(caCert)).toBe(`sha256:${openssl}`);
  });
});

describe("ClusterCredentials", () => {
  it("makes a CA, an admin certificate it signs and a join token", async () => {
    const creds = new ClusterCredentials("plb", { clusterName: "plb" });
    const kubeconfig = creds.kubeconfig("https://203.0.113.7:6443");
    await settled();
    const byType = (t: string) => recorded.filter((r) => r.type === t);
    expect(byType("tls:index/privateKey:PrivateKey").map((r) => r.inputs)).toEqual([
      { algorithm: "ECDSA", ecdsaCurve: "P256" },
      { algorithm: "ECDSA", ecdsaCurve: "P256" },
    ]);
    expect(byType("tls:index/selfSignedCert:SelfSignedCert")[0]!.inputs).toMatchObject({
      isCaCertificate: true,
      subject: { commonName: "kubernetes" },
      allowedUses: expect.arrayContaining(["cert_signing"]),
    });
    expect(byType("tls:index/certRequest:CertRequest")[0]!.inputs).toMatchObject({
      subject: { commonName: "kubernetes-admin", organization: "kubeadm:cluster-admins" },
    });
    const admin = byType("tls:index/locallySignedCert:LocallySignedCert")[0]!.inputs;
    expect(admin.allowedUses).toEqual(["digital_signature", "key_encipherment", "client_auth"]);
    expect(admin.caCertPem).toBe(caCert);
    for (const t of ["random:index/randomString:RandomString", "random:index/randomPassword:RandomPassword"])
      expect(byType(t)[0]!.inputs).toMatchObject({ special: false, upper: false });
    expect(byType("random:index/randomString:RandomString")[0]!.inputs.length).toBe(6);
    expect(byType("random:index/randomPassword:RandomPassword")[0]!.inputs.length).toBe(16);
    expect(await typeChain(creds)).toBe("portable-lb:providers:ClusterCredentials");
    const ca = recorded.find((r) => r.type === "tls:index/selfSignedCert:SelfSignedCert")!;
    expect(ca.name).toBe("plb-ca");

    expect(await valueOf(creds.joinToken)).toBe(TEST_JOIN_TOKEN);
    expect(await valueOf(creds.caCertHash)).toBe(caCertHash(caCert));
    for (const secret of [creds.joinToken, creds.caKeyPem, creds.adminKeyPem, kubeconfig])
      expect(await pulumi.isSecret(secret)).toBe(true);

    const kc = new KubeConfig();
    kc.loadFromString(await valueOf(kubeconfig));
    expect(kc.getCurrentCluster()).toMatchObject({
      name: "plb",
      server: "https://203.0.113.7:6443",
      caData: Buffer.from(caCert).toString("base64"),
    });
    expect(kc.getCurrentUser()).toMatchObject({
      name: "plb-admin",
      certData: Buffer.from(caCert).toString("base64"),
      keyData: Buffer.from(caKey).toString("base64"),
    });
  });
});
