import type { LoadBalancerServiceArgs as CoreArgs } from "@portable-lb/core";
import { installMocks, settled, typeChain } from "../../../test/unit/pulumiMocks.ts";
import {
  ExternalTrafficPolicy,
  LoadBalancerService,
  type LoadBalancerServiceArgs,
} from "./loadBalancerService.ts";

// Every arg of core's is offered to other languages: a new one there fails this until it is added
// here (in a form Pulumi's schema inference reads) or consciously left out.
type NotOffered = Exclude<keyof CoreArgs, keyof LoadBalancerServiceArgs>;
const everyArgOffered: [NotOffered] extends [never] ? true : NotOffered = true;

const recorded = installMocks();
beforeEach(() => (recorded.length = 0));

const args: LoadBalancerServiceArgs = {
  namespace: "shop",
  name: "web",
  selector: { app: "web" },
  ports: [{ name: "http", port: 80, targetPort: 8080 }],
  // As a platform stack's output may list them: without avoidBuggyIps.
  vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
};

describe("LoadBalancerService for other languages", () => {
  it("is core's component under the type token its schema names, with core's Service inside", async () => {
    expect(everyArgOffered).toBe(true);
    const lbs = new LoadBalancerService("web", {
      ...args,
      externalTrafficPolicy: ExternalTrafficPolicy.Local,
      handover: { from: ["10.0.0.21"] },
      announce: false,
    });
    await settled();
    const service = recorded.find((r) => r.type === "kubernetes:core/v1:Service")!;
    expect(service.name).toBe("web");
    expect(await typeChain(lbs)).toBe("portable-lb:index:LoadBalancerService");
    expect(recorded.map((r) => r.type)).toEqual([
      "portable-lb:index:LoadBalancerService",
      "portable-lb:core:LoadBalancerService",
      "kubernetes:core/v1:Service",
    ]);
    expect(service.inputs.spec).toMatchObject({
      type: "LoadBalancer",
      externalTrafficPolicy: "Local",
      ports: [{ name: "http", port: 80, targetPort: 8080 }],
    });
    expect(service.inputs.metadata.annotations).toEqual({
      "portable-lb.io/announce": "false",
      "portable-lb.io/handover-from": "10.0.0.21",
    });
  });

  it("leaves the checks to core: a VIP outside every pool is refused, named", () => {
    expect(() => new LoadBalancerService("web", { ...args, vips: ["10.9.9.9"] })).toThrow(
      'service.vips[0]: is outside every VIP pool (web 10.1.1.0/24) (got "10.9.9.9")',
    );
  });
});
