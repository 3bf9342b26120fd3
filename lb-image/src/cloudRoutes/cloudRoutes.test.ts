import { lbConfigSchema } from "@portable-lb/core/config";
import { CLASS, lbService } from "../controller/testing/k8sObjects.ts";
import { routeVips } from "./cloudRoutes.ts";

const config = lbConfigSchema.parse({
  loadBalancerClass: CLASS,
  routingMode: "cloud-routes",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
  cloudRoutes: { cloud: "aws", routeTableIds: ["rtb-0123456789abcdef0"] },
});

describe("routeVips", () => {
  const services = [
    lbService("web", { vips: ["10.1.1.1"], uid: "u-w" }),
    lbService("api", { vips: ["10.1.1.2"], uid: "u-a" }),
    lbService("other", { vips: ["10.1.1.3"], class: "example.com/lb" }),
  ];

  it("routes the group's VIPs this pod serves; those of other classes are none of the group's", () => {
    const v = routeVips(config, ["10.1.1.1"], services);
    expect({ cluster: [...v.cluster], served: [...v.served] }).toEqual({
      cluster: ["10.1.1.1", "10.1.1.2"],
      served: ["10.1.1.1"],
    });
    expect(v.services.get("10.1.1.2")).toEqual({ object: "default/api", uid: "u-a" });
  });

  it("counts a held-back VIP as none of the group's, so the loops remove their routes to it, but keeps its Service for Events", () => {
    const v = routeVips(config, ["10.1.1.1", "10.1.1.2"], services, new Set(["10.1.1.2"]));
    expect({ cluster: [...v.cluster], served: [...v.served] }).toEqual({
      cluster: ["10.1.1.1"],
      served: ["10.1.1.1"],
    });
    expect(v.services.get("10.1.1.2")).toEqual({ object: "default/api", uid: "u-a" });
  });
});
