// Golden files for the configs the components put into ConfigMaps, taken from the resources as
// registered. The LB config is also checked by its consumer: the controller's own schema parses it.
import { join } from "node:path";
import { installMocks, settled } from "../../../test/unit/pulumiMocks.ts";
import { lbConfigSchema, type LbConfigInput } from "./config/lbConfig.ts";
import { Flannel } from "./flannel/flannel.ts";
import { LoadBalancer } from "./loadBalancer/loadBalancer.ts";
import { expectGolden } from "./testing/golden.ts";

const recorded = installMocks();
const GOLDEN = join(__dirname, "golden");

async function configMapData(build: () => void, name: string): Promise<Record<string, string>> {
  recorded.length = 0;
  build();
  await settled();
  return recorded.find((r) => r.type === "kubernetes:core/v1:ConfigMap" && r.inputs.metadata.name === name)!
    .inputs.data;
}

describe("rendered ConfigMap configs", () => {
  it.each<[string, LbConfigInput]>([
    [
      "lb-config.bgp.json",
      {
        routingMode: "bgp",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
        bgp: { asn: 64512, routeReflectors: ["10.0.0.5", "10.0.0.6"] },
      },
    ],
    [
      "lb-config.cloud-routes.json",
      {
        routingMode: "cloud-routes",
        podCidr: "10.244.0.0/16",
        vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
        dataPlane: { engine: "nftables", scheduler: "rr" },
        cloudRoutes: { cloud: "aws", routeTableIds: ["rtb-0abc"] },
      },
    ],
  ])("%s matches its golden file and parses with the controller's schema", async (file, config) => {
    const data = await configMapData(
      () =>
        new LoadBalancer("lb", {
          image: "registry.example/portable-lb/lb:1",
          config,
          replicas: 1,
          bgpPassword: file.includes("bgp") ? "x" : undefined,
        }),
      "portable-lb-controller-config",
    );
    expectGolden(file, data["config.json"]!, GOLDEN);
    expect(lbConfigSchema.parse(JSON.parse(data["config.json"]!))).toEqual(JSON.parse(data["config.json"]!));
  });

  it.each([
    [
      "flannel-net-conf.host-gw.json",
      () => new Flannel("f", { platform: "onprem", podCidr: "10.244.0.0/16" }),
    ],
    [
      "flannel-net-conf.vxlan.json",
      () => new Flannel("f", { platform: "aws", podCidr: "10.42.0.0/16", vxlan: { vni: 4096, port: 4789 } }),
    ],
  ])("%s matches its golden file", async (file, build) => {
    expectGolden(file, (await configMapData(build, "kube-flannel-cfg"))["net-conf.json"]!, GOLDEN);
  });

  it("flannel's CNI conflist matches its golden file", async () => {
    const data = await configMapData(
      () => new Flannel("f", { platform: "lab", podCidr: "10.244.0.0/16" }),
      "kube-flannel-cfg",
    );
    expectGolden("flannel-cni-conf.json", data["cni-conf.json"]!, GOLDEN);
  });
});
