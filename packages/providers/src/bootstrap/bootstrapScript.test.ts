// The node bootstrap as every environment runs it: golden files a reviewer reads, shellcheck clean,
// the cloud-init wrapper valid by cloud-init's own schema, and the kubeadm configuration it writes,
// expanded by bash itself, accepted by kubeadm (strict) and saying what the LB needs (pod subnet,
// kubelet flags, label, taint).
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LB_NODE_SELECTOR, LB_POD_SYSCTLS } from "@portable-lb/core";
import { loadAll, load } from "js-yaml";
import { expectGolden } from "../../../core/src/testing/golden.ts";
import { KUBERNETES_VERSION, renderBootstrapScript, type BootstrapScriptInput } from "./bootstrapScript.ts";
import { BOOTSTRAP_SCRIPT_PATH, renderCloudInit } from "./cloudInit.ts";

import { METADATA_GUARD_UNIT, metadataGuardRules } from "./metadataGuard.ts";

const GOLDEN = join(__dirname, "golden");
const fixture = (name: string) => readFileSync(join(__dirname, "__fixtures__", name), "utf8");
const dir = mkdtempSync(join(tmpdir(), "plb-bootstrap-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cluster = {
  clusterName: "plb",
  controlPlaneAddress: "10.0.0.10",
  apiServerCertSans: ["203.0.113.7"],
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  joinToken: "abc123.0123456789abcdef",
  caCertHash: "sha256:abbffdef64e5adad9754e158f63dd035d13ffc5a2d79199b95f4246750603da8",
  lbTaint: false,
};

const inputs: Record<string, BootstrapScriptInput> = {
  "aws-control-plane": {
    ...cluster,
    node: { name: "plb-cp", role: "control-plane", address: "10.0.0.10" },
    providerId: { from: "aws-metadata" },
    ca: { certPem: fixture("test-ca.crt"), keyPem: fixture("test-ca.key") },
  },
  "aws-lb-tainted": {
    ...cluster,
    lbTaint: true,
    node: { name: "plb-lb-1", role: "lb", address: "10.0.128.10" },
    providerId: { from: "aws-metadata" },
  },
  "gcp-worker": {
    ...cluster,
    node: { name: "plb-worker-1", role: "worker", address: "10.0.0.13" },
    providerId: { from: "value", value: "gce://my-project-123/europe-west4-b/plb-worker-1" },
  },
  "onprem-lb": {
    ...cluster,
    node: { name: "lb-1", role: "lb", address: "10.0.0.11" },
  },
  "onprem-control-plane-site": {
    ...cluster,
    node: { name: "cp", role: "control-plane", address: "10.0.0.10" },
    ca: { certPem: fixture("test-ca.crt"), keyPem: fixture("test-ca.key") },
    machines: {
      imageRepository: "registry.example.net:5000/k8s",
      cgroupV1: true,
      kubeadmPatches: "/etc/kubernetes/patches",
      kubeProxy: { conntrack: { maxPerCore: 0, tcpEstablishedTimeout: "0s" }, oomScoreAdj: 0 },
    },
  },
};

/**
 * The kubeadm configuration the script writes, as bash expands it: after the script's own
 * PROVIDER_ID assignment when it has a static one, else with the one the metadata service would give.
 */
function kubeadmConfig(
  script: string,
  metadataProviderId = "aws:///eu-central-1a/i-0123456789abcdef0",
): string {
  const lines = script.split("\n");
  const start = lines.findIndex((l) => l.endsWith("<<KUBEADM"));
  const end = lines.indexOf("KUBEADM", start);
  const assignment = lines.filter((l) => /^PROVIDER_ID=[^$]*$/.test(l));
  const heredoc = [...assignment, "cat <<KUBEADM", ...lines.slice(start + 1, end + 1)].join("\n");
  return execFileSync("bash", ["--norc", "--noprofile", "-euc", heredoc], {
    env: { PROVIDER_ID: metadataProviderId },
    encoding: "utf8",
  });
}
const kubeadmDocs = (script: string, metadataProviderId?: string) =>
  loadAll(kubeadmConfig(script, metadataProviderId));

type Registration = {
  name: string;
  kubeletExtraArgs: { name: string; value: string }[];
  taints?: { key: string; effect: string }[];
};
const registrationOf = (docs: unknown[]) => (docs[0] as { nodeRegistration: Registration }).nodeRegistration;
const kubeletArgs = (r: Registration) => Object.fromEntries(r.kubeletExtraArgs.map((a) => [a.name, a.value]));

describe("renderBootstrapScript", () => {
  it.each(Object.keys(inputs))("renders %s as its golden file, shellcheck clean", (name) => {
    const script = renderBootstrapScript(inputs[name]!);
    expectGolden(`${name}.sh`, script, GOLDEN);
    const check = spawnSync("shellcheck", ["--shell=bash", "--severity=style", "-"], {
      input: script,
      encoding: "utf8",
    });
    expect(check.error).toBeUndefined();
    expect(check.stdout).toBe("");
    expect(check.status).toBe(0);
  });

  it.each(Object.keys(inputs))("writes for %s a configuration kubeadm itself accepts", (name) => {
    const file = join(dir, `${name}.kubeadm.yaml`);
    writeFileSync(file, kubeadmConfig(renderBootstrapScript(inputs[name]!)));
    const check = spawnSync("kubeadm", ["config", "validate", "--config", file], { encoding: "utf8" });
    expect(check.error).toBeUndefined();
    expect(check.stderr).toBe("");
    expect(check.stdout.trim()).toBe("ok");
    expect(check.status).toBe(0);
  });

  it("is checked by kubeadm's strict decoding: a misspelt field fails it", () => {
    const file = join(dir, "bad.kubeadm.yaml");
    writeFileSync(
      file,
      kubeadmConfig(renderBootstrapScript(inputs["aws-lb-tainted"]!)).replace("caCertHashes", "caCertHash"),
    );
    const check = spawnSync("kubeadm", ["config", "validate", "--config", file], { encoding: "utf8" });
    expect(check.status).not.toBe(0);
    expect(check.stderr).toContain('unknown field "discovery.bootstrapToken.caCertHash"');
  });

  it("inits the control plane with the pod and service subnets flannel and the cluster use", () => {
    const script = renderBootstrapScript(inputs["aws-control-plane"]!);
    const [init, clusterConfig, kubelet] = kubeadmDocs(script) as Record<string, unknown>[];
    expect(init).toMatchObject({
      kind: "InitConfiguration",
      // A token that never expires: machines added any time later join with it.
      bootstrapTokens: [{ token: cluster.joinToken, ttl: "0s" }],
      localAPIEndpoint: { advertiseAddress: "10.0.0.10", bindPort: 6443 },
    });
    expect(clusterConfig).toMatchObject({
      kind: "ClusterConfiguration",
      kubernetesVersion: `v${KUBERNETES_VERSION}`,
      controlPlaneEndpoint: "10.0.0.10:6443",
      networking: { podSubnet: cluster.podCidr, serviceSubnet: cluster.serviceCidr },
      apiServer: { certSANs: ["10.0.0.10", "203.0.113.7"] },
    });
    expect(kubelet).toMatchObject({ kind: "KubeletConfiguration", cgroupDriver: "systemd" });
    // The CA goes where kubeadm looks for one, before kubeadm init.
    expect(script.indexOf("cat >/etc/kubernetes/pki/ca.key <<'CA_KEY'")).toBeLessThan(
      script.indexOf("kubeadm init --config"),
    );
    expect(script).toContain(fixture("test-ca.key").trimEnd());
  });

  it("gives LB nodes the LB label, the LB pods' sysctls, the provider ID and (when asked) the taint", () => {
    const script = renderBootstrapScript(inputs["aws-lb-tainted"]!);
    const docs = kubeadmDocs(script);
    expect(docs[0]).toMatchObject({
      kind: "JoinConfiguration",
      discovery: {
        bootstrapToken: {
          apiServerEndpoint: "10.0.0.10:6443",
          token: cluster.joinToken,
          caCertHashes: [cluster.caCertHash],
        },
      },
    });
    const reg = registrationOf(docs);
    const [labelKey, labelValue] = Object.entries(DEFAULT_LB_NODE_SELECTOR)[0]!;
    expect(reg.name).toBe("plb-lb-1");
    expect(kubeletArgs(reg)).toEqual({
      "node-ip": "10.0.128.10",
      "provider-id": "aws:///eu-central-1a/i-0123456789abcdef0",
      "allowed-unsafe-sysctls": LB_POD_SYSCTLS.join(","),
      "node-labels": `${labelKey}=${labelValue}`,
    });
    expect(LB_POD_SYSCTLS).toContain("net.ipv4.ip_forward");
    expect(reg.taints).toEqual([{ key: labelKey, effect: "NoSchedule" }]);
    expect(renderBootstrapScript({ ...inputs["aws-lb-tainted"]!, lbTaint: false })).not.toContain("taints:");
  });

  it("keeps workers unlabelled and untainted, with a provider ID known beforehand on GCE", () => {
    const reg = registrationOf(kubeadmDocs(renderBootstrapScript(inputs["gcp-worker"]!), "not-this-one"));
    expect(kubeletArgs(reg)).toEqual({
      "node-ip": "10.0.0.13",
      "provider-id": "gce://my-project-123/europe-west4-b/plb-worker-1",
    });
    expect(reg.taints).toBeUndefined();
    // On premises there is no instance to name.
    const onprem = registrationOf(kubeadmDocs(renderBootstrapScript(inputs["onprem-lb"]!)));
    expect(kubeletArgs(onprem)["provider-id"]).toBeUndefined();
  });

  it("keeps pods from the instance metadata on cloud machines, before kubeadm runs", () => {
    const guarded = (name: string) =>
      renderBootstrapScript(inputs[name]!).includes(metadataGuardRules().trimEnd());
    expect(Object.keys(inputs).filter(guarded).sort()).toEqual([
      "aws-control-plane",
      "aws-lb-tainted",
      "gcp-worker",
    ]);
    const script = renderBootstrapScript(inputs["gcp-worker"]!);
    const unit = `systemctl enable --now ${METADATA_GUARD_UNIT}`;
    expect(script.indexOf(unit)).toBeGreaterThan(-1);
    expect(script.indexOf(unit)).toBeLessThan(script.indexOf("kubeadm join"));
    // The kubelet does not start without it, at this boot or any later one.
    expect(script).toMatch(/^RequiredBy=kubelet\.service$/m);
    expect(script).toMatch(/^Before=kubelet\.service$/m);
  });

  it("tells kubeadm of the site's machines: their image mirror, their cgroup v1, their own patches", () => {
    const site = inputs["onprem-control-plane-site"]!;
    const [init, clusterConfig, kubelet, proxy] = kubeadmDocs(renderBootstrapScript(site)) as Record<
      string,
      unknown
    >[];
    expect(init).toMatchObject({
      nodeRegistration: { ignorePreflightErrors: ["SystemVerification"] },
      patches: { directory: "/etc/kubernetes/patches" },
    });
    expect(clusterConfig).toMatchObject({ imageRepository: "registry.example.net:5000/k8s" });
    expect(kubelet).toMatchObject({ cgroupDriver: "systemd", failCgroupV1: false });
    expect(proxy).toEqual({
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      conntrack: { maxPerCore: 0, tcpEstablishedTimeout: "0s" },
      oomScoreAdj: 0,
    });
    // A joining node skips the same check and reads the same folder; the cluster gives it the rest.
    const join = kubeadmDocs(
      renderBootstrapScript({
        ...site,
        node: { name: "lb-1", role: "lb", address: "10.0.0.11" },
        ca: undefined,
      }),
    );
    expect(join).toHaveLength(1);
    expect(join[0]).toMatchObject({
      kind: "JoinConfiguration",
      nodeRegistration: { ignorePreflightErrors: ["SystemVerification"] },
      patches: { directory: "/etc/kubernetes/patches" },
    });
    // Without them, kubeadm's defaults: no mirror, no skipped check, cgroup v1 refused.
    const plain = kubeadmDocs(renderBootstrapScript({ ...site, machines: {} })) as Record<string, unknown>[];
    expect(plain[0]).not.toHaveProperty("patches");
    expect(plain[0]!.nodeRegistration).not.toHaveProperty("ignorePreflightErrors");
    expect(plain[1]).not.toHaveProperty("imageRepository");
    expect(plain[2]).not.toHaveProperty("failCgroupV1");
    expect(plain).toHaveLength(3);
  });

  it("refuses a value that would change the script's meaning", () => {
    expect(() =>
      renderBootstrapScript({
        ...inputs["onprem-lb"]!,
        node: { name: "lb-1$(reboot)", role: "lb", address: "10.0.0.11" },
      }),
    ).toThrow('bootstrap script: node.name "lb-1$(reboot)" is not a plain value');
    expect(() => renderBootstrapScript({ ...inputs["aws-control-plane"]!, ca: undefined })).toThrow(
      "the control plane needs the cluster CA",
    );
  });

  it("pins the Kubernetes version the lab builds", () => {
    const versions = readFileSync(join(__dirname, "../../../../scripts/versions.env"), "utf8");
    expect(versions).toMatch(
      new RegExp(`^KUBERNETES_VERSION=${KUBERNETES_VERSION.replaceAll(".", "\\.")}$`, "m"),
    );
  });
});

describe("renderCloudInit", () => {
  it.each(["aws-control-plane", "aws-lb-tainted"])(
    "wraps %s in cloud-config that cloud-init's schema accepts and that fits EC2 user data",
    (name) => {
      const script = renderBootstrapScript(inputs[name]!);
      const userData = renderCloudInit(script);
      expectGolden(`${name}.cloud-init.yaml`, userData, GOLDEN);
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, userData);
      const schema = spawnSync("cloud-init", ["schema", "--config-file", file], { encoding: "utf8" });
      expect(schema.error).toBeUndefined();
      expect(schema.stdout.trim()).toBe(`Valid cloud-config: ${file}`);
      expect(schema.status).toBe(0);
      const parsed = load(userData) as {
        write_files: { path: string; content: string }[];
        runcmd: string[][];
      };
      expect(parsed.write_files).toEqual([
        expect.objectContaining({ path: BOOTSTRAP_SCRIPT_PATH, content: script }),
      ]);
      expect(parsed.runcmd).toEqual([["bash", BOOTSTRAP_SCRIPT_PATH]]);
      // EC2 takes at most 16 KiB of user data.
      expect(Buffer.byteLength(userData)).toBeLessThan(16 * 1024);
    },
  );

  it("is checked by cloud-init's schema: a misspelt key fails it", () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, renderCloudInit("echo hi\n").replace("permissions:", "permission:"));
    const schema = spawnSync("cloud-init", ["schema", "--config-file", file], { encoding: "utf8" });
    expect(schema.status).not.toBe(0);
    expect(schema.stdout + schema.stderr).toContain("'permission' was unexpected");
  });
});
