// The cluster's credentials, made by Pulumi before any machine exists: the cluster CA (kubeadm signs
// with it), the admin client certificate (so the kubeconfig is known without SSH) and the bootstrap
// token nodes join with. Keys and the token's secret live in state as secrets.
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import * as tls from "@pulumi/tls";
import type { NodeFact } from "../provider.ts";
import { ADMIN_GROUP, renderAdminKubeconfig } from "./adminKubeconfig.ts";
import { renderBootstrapScript, type MachineSettings, type ProviderIdSource } from "./bootstrapScript.ts";
import { caCertHash } from "./caCertHash.ts";

export interface ClusterCredentialsArgs {
  clusterName: string;
}

/** What every node's bootstrap script shares besides the credentials. */
export interface ClusterBootstrap {
  controlPlaneAddress: string;
  /** The API server's public address: in its certificate, and in the kubeconfig. */
  apiAddress: pulumi.Input<string>;
  podCidr: string;
  serviceCidr: string;
  lbTaint: boolean;
  machines?: MachineSettings;
}

/** What a cluster's bootstrap scripts share, from its planned machines and its networks. */
export function clusterBootstrap(o: {
  nodes: readonly NodeFact[];
  network: { podCidr: string; serviceCidr: string };
  lbTaint: boolean;
  apiAddress: pulumi.Input<string>;
  machines?: MachineSettings;
}): ClusterBootstrap {
  const controlPlane = o.nodes.find((n) => n.role === "control-plane");
  if (!controlPlane) throw new Error("a cluster's plan has a control plane");
  return {
    controlPlaneAddress: controlPlane.address,
    apiAddress: o.apiAddress,
    podCidr: o.network.podCidr,
    serviceCidr: o.network.serviceCidr,
    lbTaint: o.lbTaint,
    ...(o.machines && { machines: o.machines }),
  };
}

const TEN_YEARS_H = 10 * 365 * 24;
const ONE_YEAR_H = 365 * 24;

export class ClusterCredentials extends pulumi.ComponentResource {
  public readonly caCertPem: pulumi.Output<string>;
  public readonly caKeyPem: pulumi.Output<string>;
  /** What joining nodes pin: sha256 of the CA's public key. */
  public readonly caCertHash: pulumi.Output<string>;
  /** The bootstrap token, id.secret (a secret). */
  public readonly joinToken: pulumi.Output<string>;
  public readonly adminCertPem: pulumi.Output<string>;
  public readonly adminKeyPem: pulumi.Output<string>;
  private readonly clusterName: string;

  constructor(name: string, args: ClusterCredentialsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("portable-lb:providers:ClusterCredentials", name, {}, opts);
    const child = { parent: this };
    this.clusterName = args.clusterName;

    const caKey = new tls.PrivateKey(`${name}-ca-key`, { algorithm: "ECDSA", ecdsaCurve: "P256" }, child);
    const ca = new tls.SelfSignedCert(
      `${name}-ca`,
      {
        privateKeyPem: caKey.privateKeyPem,
        subject: { commonName: "kubernetes" },
        isCaCertificate: true,
        validityPeriodHours: TEN_YEARS_H,
        allowedUses: ["cert_signing", "crl_signing", "digital_signature", "key_encipherment"],
      },
      child,
    );
    const adminKey = new tls.PrivateKey(
      `${name}-admin-key`,
      { algorithm: "ECDSA", ecdsaCurve: "P256" },
      child,
    );
    const adminCsr = new tls.CertRequest(
      `${name}-admin-csr`,
      {
        privateKeyPem: adminKey.privateKeyPem,
        subject: { commonName: "kubernetes-admin", organization: ADMIN_GROUP },
      },
      child,
    );
    const admin = new tls.LocallySignedCert(
      `${name}-admin`,
      {
        certRequestPem: adminCsr.certRequestPem,
        caPrivateKeyPem: caKey.privateKeyPem,
        caCertPem: ca.certPem,
        validityPeriodHours: ONE_YEAR_H,
        allowedUses: ["digital_signature", "key_encipherment", "client_auth"],
      },
      child,
    );
    // kubeadm's token format: [a-z0-9]{6}.[a-z0-9]{16}.
    const tokenPart = { special: false, upper: false, lower: true, numeric: true };
    const tokenId = new random.RandomString(`${name}-token-id`, { length: 6, ...tokenPart }, child);
    const tokenSecret = new random.RandomPassword(
      `${name}-token-secret`,
      { length: 16, ...tokenPart },
      child,
    );

    this.caCertPem = ca.certPem;
    this.caKeyPem = pulumi.secret(caKey.privateKeyPem);
    this.caCertHash = ca.certPem.apply(caCertHash);
    this.joinToken = pulumi.secret(pulumi.interpolate`${tokenId.result}.${tokenSecret.result}`);
    this.adminCertPem = admin.certPem;
    this.adminKeyPem = pulumi.secret(adminKey.privateKeyPem);
    this.registerOutputs({ caCertPem: this.caCertPem, caCertHash: this.caCertHash });
  }

  /** The admin kubeconfig for the API server at `server` (https://HOST:PORT), a secret. */
  kubeconfig(server: pulumi.Input<string>): pulumi.Output<string> {
    return pulumi.secret(
      pulumi
        .all([server, this.caCertPem, this.adminCertPem, this.adminKeyPem])
        .apply(([s, caCertPem, clientCertPem, clientKeyPem]) =>
          renderAdminKubeconfig({
            clusterName: this.clusterName,
            server: s,
            caCertPem,
            clientCertPem,
            clientKeyPem,
          }),
        ),
    );
  }

  /** One node's bootstrap script (a secret: the token, and on the control plane the CA key). */
  bootstrapScript(
    cluster: ClusterBootstrap,
    node: NodeFact,
    providerId?: ProviderIdSource,
  ): pulumi.Output<string> {
    return pulumi.secret(
      pulumi
        .all([cluster.apiAddress, this.joinToken, this.caCertHash, this.caCertPem, this.caKeyPem])
        .apply(([apiAddress, joinToken, caCertHash, caCertPem, caKeyPem]) =>
          renderBootstrapScript({
            clusterName: this.clusterName,
            node: { name: node.name, role: node.role, address: node.address },
            ...(providerId && { providerId }),
            controlPlaneAddress: cluster.controlPlaneAddress,
            apiServerCertSans: [apiAddress],
            podCidr: cluster.podCidr,
            serviceCidr: cluster.serviceCidr,
            joinToken,
            caCertHash,
            ...(node.role === "control-plane" && { ca: { certPem: caCertPem, keyPem: caKeyPem } }),
            lbTaint: cluster.lbTaint,
            ...(cluster.machines && { machines: cluster.machines }),
          }),
        ),
    );
  }
}
