// The root program (PortableCluster: Flannel, LoadBalancer, RouteReflectors) deployed by the real
// Pulumi engine into the run's local kube-apiserver, which validates every manifest server-side.
// Then: the objects through the API, least-privilege RBAC through `kubectl auth can-i`, a preview
// that changes nothing, and a destroy that leaves nothing.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { AppsV1Api, CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { lbConfigSchema } from "@portable-lb/core/config";
import { waitUntil } from "@portable-lb/lab";
import { testKubeconfig } from "../harness/testEnv.ts";
import { TestStack } from "../harness/testStack.ts";

const run = promisify(execFile);
const repoRoot = join(__dirname, "..", "..");

const kc = new KubeConfig();
kc.loadFromFile(testKubeconfig());
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const rbac = kc.makeApiClient(RbacAuthorizationV1Api);

/** `kubectl auth can-i` as a ServiceAccount: true for "yes", false for "no" (kubectl exits 1 then). */
async function canI(sa: string, ...args: string[]): Promise<boolean> {
  const cmd = [
    "--kubeconfig",
    testKubeconfig(),
    "auth",
    "can-i",
    `--as=system:serviceaccount:${sa}`,
    ...args,
  ];
  try {
    return (await run("kubectl", cmd)).stdout.trim() === "yes";
  } catch (err) {
    const out = (err as { stdout?: string }).stdout?.trim();
    if (out === "no") return false;
    throw err;
  }
}

async function gone(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return false;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return true;
    throw err;
  }
}

describe("PortableCluster through the root program on the local control plane", () => {
  let stack: TestStack;
  let created = 0;

  beforeAll(async () => {
    stack = await TestStack.create({
      program: repoRoot,
      config: {
        "portable-lb:environment": {
          kind: "kubeconfig",
          kubeconfig: testKubeconfig(),
          platform: "onprem",
          bgp: { routers: ["10.0.0.1"] },
        },
        "portable-lb:network": {
          nodeCidr: "10.0.0.0/24",
          podCidr: "10.244.0.0/16",
          serviceCidr: "10.96.0.0/16",
          vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        },
        "portable-lb:loadBalancer": {
          replicas: 2,
          // Never pulled: no kubelets here.
          image: "registry.example.com/portable-lb/lb:e2e",
          bgp: { asn: 64512 },
          routeReflectors: [
            { node: "rr1", address: "10.0.0.5" },
            { node: "rr2", address: "10.0.0.6" },
          ],
        },
        // No kubelets here: pods never become ready, so the engine must not wait for them.
        "portable-lb:skipAwait": true,
      },
      secrets: { "portable-lb:bgpPassword": "e2e-s3cret" },
    });
  });
  afterAll(async () => {
    await stack?.dispose();
  });

  it("deploys flannel, the LB and the route reflectors, all accepted by the apiserver", async () => {
    const up = await stack.stack.up({ color: "never" });
    expect(up.summary.result).toBe("succeeded");
    created = up.summary.resourceChanges?.create ?? 0;
    expect(created).toBeGreaterThan(20);
    expect(up.outputs.loadBalancerClass?.value).toBe("portable-lb.io/ecmp");
    expect(up.outputs.routingMode?.value).toBe("bgp");
    expect(up.outputs.routerConfig?.secret).toBe(true);
    expect(up.outputs.routerConfig?.value).toContain("neighbor 10.0.0.5");
    expect(up.outputs.kubeconfig?.secret).toBe(true);

    const flannelNs = await core.readNamespace({ name: "kube-flannel" });
    expect(flannelNs.metadata?.labels?.["pod-security.kubernetes.io/enforce"]).toBe("privileged");
    const ds = await apps.readNamespacedDaemonSet({ name: "kube-flannel-ds", namespace: "kube-flannel" });
    expect(ds.spec?.template.spec?.containers[0]?.securityContext?.capabilities?.add).toEqual([
      "NET_ADMIN",
      "NET_RAW",
    ]);

    const lb = await apps.readNamespacedDeployment({
      name: "portable-lb-controller",
      namespace: "portable-lb-system",
    });
    expect(lb.spec?.replicas).toBe(2);
    expect(lb.spec?.template.spec?.containers.map((c) => c.name)).toEqual(["controller", "bgp-speaker"]);
    for (const name of ["portable-lb-rr-0", "portable-lb-rr-1"]) {
      const rr = await apps.readNamespacedDeployment({ name, namespace: "portable-lb-system" });
      expect(rr.spec?.template.spec?.hostNetwork).toBe(true);
    }
    const cm = await core.readNamespacedConfigMap({
      name: "portable-lb-controller-config",
      namespace: "portable-lb-system",
    });
    const config = lbConfigSchema.parse(JSON.parse(cm.data!["config.json"]!));
    expect(config.bgp?.routeReflectors).toEqual(["10.0.0.5", "10.0.0.6"]);
    expect(config.bgp?.passwordFile).toBe("/etc/portable-lb/bgp/password");
    const secret = await core.readNamespacedSecret({
      name: "portable-lb-controller-bgp",
      namespace: "portable-lb-system",
    });
    expect(Buffer.from(secret.data!.password!, "base64").toString()).toBe("e2e-s3cret");
  });

  it("gives the LB controller exactly the rights it needs (least privilege)", async () => {
    const lb = "portable-lb-system:portable-lb-controller";
    const expectations: [string[], boolean][] = [
      [["watch", "endpointslices.discovery.k8s.io", "-n", "default"], true],
      [["list", "services", "--all-namespaces"], true],
      [["update", "services", "--subresource=status", "-n", "default"], true],
      [["create", "events", "-n", "default"], true],
      [["update", "leases.coordination.k8s.io", "-n", "portable-lb-system"], true],
      [["get", "secrets", "-n", "portable-lb-system"], false],
      [["get", "secrets", "-n", "default"], false],
      [["delete", "pods", "-n", "default"], false],
      [["update", "services", "-n", "default"], false],
      [["create", "leases.coordination.k8s.io", "-n", "default"], false],
      [["list", "nodes"], false],
    ];
    for (const [args, allowed] of expectations) {
      expect([args.join(" "), await canI(lb, ...args)]).toEqual([args.join(" "), allowed]);
    }
    const flannel = "kube-flannel:flannel";
    expect(await canI(flannel, "patch", "nodes", "--subresource=status")).toBe(true);
    expect(await canI(flannel, "patch", "nodes")).toBe(false);
    expect(await canI(flannel, "delete", "nodes")).toBe(false);
    expect(await canI(flannel, "get", "secrets", "-n", "kube-flannel")).toBe(false);
    // The reflectors never talk to the API.
    expect(
      await canI("portable-lb-system:portable-lb-route-reflector", "get", "pods", "-n", "portable-lb-system"),
    ).toBe(false);
  });

  it("previews no changes after up (no perpetual diff)", async () => {
    const preview = await stack.stack.preview({ color: "never" });
    expect(preview.changeSummary).toEqual({ same: created });
  });

  it("removes everything on destroy", async () => {
    const destroy = await stack.stack.destroy({ color: "never" });
    expect(destroy.summary.result).toBe("succeeded");
    expect(destroy.summary.resourceChanges).toEqual({ delete: created });
    expect(await gone(() => rbac.readClusterRole({ name: "portable-lb-controller" }))).toBe(true);
    expect(await gone(() => rbac.readClusterRole({ name: "flannel" }))).toBe(true);
    // Namespaces are finalized asynchronously by the namespace controller; bounded wait.
    for (const name of ["portable-lb-system", "kube-flannel"]) {
      expect(await waitUntil(() => gone(() => core.readNamespace({ name })), 90_000, 250)).toBe(true);
    }
  });
});
