// The portability proof: the one app stack rendered against the platform stack of every environment
// (onprem, aws, gcp, an existing cluster and the lab). Each platform's outputs are the root program's
// own, run under Pulumi's mocks with that environment's stack settings (platformsUnderMocks.ts); the
// app reads them through its StackReference. Its objects must be the same everywhere but for what the
// platform hands in. The lab's e2e test does the same with the real lab's outputs.
import type { OutputMap } from "@pulumi/pulumi/automation/index.js";
import { VIP_POOL_ANNOTATION } from "@portable-lb/core/config";
import { platformsUnderMocks } from "./platformsUnderMocks.ts";
import { renderAppStack, type RenderedObject } from "./renderAppStack.ts";

// The lab runs the LB image this checkout built (lb-image/.image.json); a unit test needs none built.
jest.mock("../../packages/lab/src/builtLbImage.ts", () => ({
  builtLbImage: () => ({ ref: "localhost/portable-lb/lb:unit", archive: "/nonexistent/lb.tar" }),
}));

const platforms: Record<string, OutputMap> = {};
const renders: Record<string, RenderedObject[]> = {};

beforeAll(async () => {
  Object.assign(platforms, await platformsUnderMocks({ lab: true }));
  for (const [name, outputs] of Object.entries(platforms)) renders[name] = await renderAppStack(outputs);
}, 120_000);

const outputOf = (name: string, key: string) => platforms[name]![key]!;

describe("the app stack on every platform", () => {
  it("gets a different cluster, class, routing and pool ranges from each platform", () => {
    const names = Object.keys(platforms);
    expect(names).toEqual(["onprem", "aws", "gcp", "existing", "lab"]);
    const kubeconfigs = names.map((n) => outputOf(n, "kubeconfig"));
    expect(kubeconfigs.every((k) => k.secret && typeof k.value === "string")).toBe(true);
    expect(new Set(kubeconfigs.map((k) => k.value)).size).toBe(names.length);
    expect(names.map((n) => outputOf(n, "loadBalancerClass").value)).toEqual([
      "portable-lb.io/ecmp",
      "portable-lb.io/ecmp",
      "portable-lb.io/ecmp",
      "example.com/shared-lb",
      "portable-lb.io/ecmp",
    ]);
    expect(names.map((n) => outputOf(n, "routingMode").value)).toEqual([
      "bgp",
      "cloud-routes",
      "cloud-routes",
      "bgp",
      "bgp",
    ]);
    const webCidr = (n: string) =>
      (outputOf(n, "vipPools").value as { name: string; cidr: string }[]).find((p) => p.name === "web")!.cidr;
    expect(new Set(names.map(webCidr)).size).toBe(names.length);
  });

  it("renders the same objects everywhere but for what the platform hands in", () => {
    for (const name of Object.keys(renders))
      expect({ [name]: renders[name] }).toEqual({ [name]: renders.onprem });
  });

  it("renders the app's own objects: a LoadBalancer Service of the platform's class from the web pool", () => {
    // The platform with a class of its own: had the app taken the default, this would show it.
    const objects = renders.existing!;
    expect(objects.map((o) => `${o.type} ${o.name}`)).toEqual([
      "kubernetes:apps/v1:Deployment web",
      "kubernetes:core/v1:Namespace shop",
      "kubernetes:core/v1:Service web",
      "portable-lb:core:LoadBalancerService web",
      "pulumi:providers:kubernetes platform",
      "pulumi:pulumi:StackReference platform",
    ]);
    const of = (type: string) => objects.find((o) => o.type === type)! as RenderedObject & { inputs: any }; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
    const service = of("kubernetes:core/v1:Service").inputs;
    expect(service.spec).toMatchObject({
      type: "LoadBalancer",
      loadBalancerClass: "<platform loadBalancerClass>",
    });
    expect(service.metadata.annotations).toEqual({ [VIP_POOL_ANNOTATION]: "web" });
    // Everything goes to the platform's cluster, with its kubeconfig kept secret.
    const provider = of("pulumi:providers:kubernetes");
    expect(provider.inputs.kubeconfig).toEqual({ secret: "<platform kubeconfig>" });
    const ref = `urn:pulumi:unit::shop::pulumi:providers:kubernetes::platform::platform-id`;
    for (const type of [
      "kubernetes:apps/v1:Deployment",
      "kubernetes:core/v1:Namespace",
      "kubernetes:core/v1:Service",
    ])
      expect([type, of(type).provider]).toEqual([type, ref]);
  });

  it("shows a platform handing over its kubeconfig in plaintext: the comparison is not vacuous", async () => {
    const plaintext = await renderAppStack({
      ...platforms.aws!,
      kubeconfig: { ...outputOf("aws", "kubeconfig"), secret: false },
    });
    expect(plaintext).not.toEqual(renders.aws);
    // And only there: the provider's kubeconfig, the one input that came in secret.
    const expected = renders.aws!.map((o) =>
      o.type === "pulumi:providers:kubernetes"
        ? { ...o, inputs: { ...o.inputs, kubeconfig: "<platform kubeconfig>" } }
        : o,
    );
    expect(plaintext).toEqual(expected);
  });

  it("fails on a platform without the app's pool, naming the pools it has", async () => {
    await expect(
      renderAppStack({
        ...platforms.lab!,
        vipPools: { value: [{ name: "public", cidr: "10.9.0.0/24" }], secret: false },
      }),
    ).rejects.toThrow('service.pool: no such VIP pool (got "web"); use one of: public');
  });
});
