import { parseOrThrow } from "../validation.ts";
import { lbConfigSchema } from "../config/lbConfig.ts";
import { LB_POD_SYSCTLS, lbPodSysctls } from "./podSpec.ts";

const config = (engine: string) =>
  parseOrThrow(
    lbConfigSchema,
    {
      routingMode: "bgp",
      podCidr: "10.244.0.0/16",
      vipPools: [{ name: "default", cidr: "10.1.1.0/24" }],
      bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
      dataPlane: { engine },
    },
    "lb",
  );

describe("the LB pod's sysctls", () => {
  it("set the net.ipv4.vs sysctls only when IPVS is forced (a kernel without ip_vs lacks them)", () => {
    expect(lbPodSysctls(config("ipvs"))).toEqual([
      "net.ipv4.ip_forward",
      "net.ipv4.vs.conntrack",
      "net.ipv4.vs.expire_nodest_conn",
    ]);
    expect(lbPodSysctls(config("auto"))).toEqual(["net.ipv4.ip_forward"]);
    expect(lbPodSysctls(config("nftables"))).toEqual(["net.ipv4.ip_forward"]);
  });

  it("are all allowed on the LB nodes' kubelets, whatever the engine", () => {
    for (const engine of ["ipvs", "auto", "nftables"])
      expect(LB_POD_SYSCTLS).toEqual(expect.arrayContaining(lbPodSysctls(config(engine))));
  });
});
