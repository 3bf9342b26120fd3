import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { installMocks, valueOf } from "../../../test/unit/pulumiMocks.ts";
import { environmentFromConfig } from "./stackEnvironment.ts";

installMocks();
const dir = mkdtempSync(join(tmpdir(), "plb-env-"));
const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://127.0.0.1:6443" } }]
users: [{ name: u, user: {} }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configWith(environment: unknown): pulumi.Config {
  const values: Record<string, string> =
    environment === undefined ? {} : { "portable-lb:environment": JSON.stringify(environment) };
  pulumi.runtime.setAllConfig(values);
  return new pulumi.Config("portable-lb");
}

describe("environmentFromConfig", () => {
  it("reads the kubeconfig file of a kubeconfig environment, as a secret", async () => {
    const file = join(dir, "kubeconfig");
    writeFileSync(file, KUBECONFIG);
    const env = environmentFromConfig(configWith({ kind: "kubeconfig", kubeconfig: file }));
    expect(env.kind).toBe("kubeconfig");
    expect(env.platform).toBe("onprem");
    expect(await valueOf(env.kubeconfig)).toBe(KUBECONFIG);
    expect(await pulumi.isSecret(env.kubeconfig)).toBe(true);
  });

  it("passes platform, BGP routers and the LB node count through", () => {
    const file = join(dir, "kubeconfig");
    writeFileSync(file, KUBECONFIG);
    const env = environmentFromConfig(
      configWith({
        kind: "kubeconfig",
        kubeconfig: file,
        platform: "aws",
        bgp: { routers: ["10.0.0.1"] },
        lbNodeCount: 3,
      }),
    );
    expect(env).toMatchObject({ platform: "aws", bgp: { routers: ["10.0.0.1"] }, lbNodeCount: 3 });
  });

  it.each([
    [
      undefined,
      /^portable-lb:environment: not set; run 'pulumi config set --path environment.kind kubeconfig'/,
    ],
    [
      { kind: "azure" },
      /^environment\.kind: unknown environment kind; set environment\.kind to one of "kubeconfig", "onprem", "aws", "gcp", "lab" \(got "azure"\)$/,
    ],
    [
      { kind: "kubeconfig" },
      /^environment\.kubeconfig: the path to a kubeconfig file is required, e\.g\. ~\/\.kube\/config \(not set\)$/,
    ],
    [
      { kind: "kubeconfig", kubeconfig: "/nonexistent/kc" },
      /^environment\.kubeconfig: cannot read "\/nonexistent\/kc" \(ENOENT.*\); point it at an existing kubeconfig file$/,
    ],
  ])("rejects %j with a message naming the field, the value and the fix", (environment, message) => {
    expect(() => environmentFromConfig(configWith(environment))).toThrow(message);
  });
});
