import { CLASS, lbService } from "../../controller/testing/k8sObjects.ts";
import { unreachableBackendEvents } from "./unreachableBackendEvents.ts";

describe("unreachableBackendEvents", () => {
  const web = lbService("web", { vips: ["10.1.1.10"], uid: "u1" });
  const api = lbService("api", { vips: ["10.1.1.11"], ns: "team" });
  const foreign = lbService("other", { vips: ["10.1.1.10"], class: "example.com/other" });

  it("tells each of our Services served by a host-network backend, on the Service", () => {
    const items = unreachableBackendEvents(
      [{ ip: "10.0.0.7", vips: ["10.1.1.10"] }],
      [web, api, foreign],
      { loadBalancerClass: CLASS },
      "n1",
    );
    expect(items).toEqual([
      {
        object: "default/web",
        uid: "u1",
        kind: "Service",
        reason: "DirectServerReturnHostNetworkBackend",
        message: expect.stringMatching(
          /^backend 10\.0\.0\.7 on node n1 is on the host network .* get no answer\. Run it in the pod network, or set dataPlane\.mode snat$/,
        ),
      },
    ]);
  });

  it("says nothing without host-network backends", () => {
    expect(unreachableBackendEvents([], [web, api], { loadBalancerClass: CLASS }, "n1")).toEqual([]);
  });
});
