import { lbService } from "./testing/k8sObjects.ts";
import { unsupportedFields } from "./unsupportedFields.ts";

const withSpec = (name: string, spec: Record<string, unknown>) => {
  const svc = lbService(name, { uid: `u-${name}` });
  return { ...svc, spec: { ...svc.spec, ...spec } };
};

describe("unsupportedFields", () => {
  it("refuses each field it does not honour, on its Service, naming the field and the way out", () => {
    const items = unsupportedFields([
      withSpec("v6", { ipFamilies: ["IPv6"] }),
      withSpec("dual", { ipFamilies: ["IPv4"], ipFamilyPolicy: "RequireDualStack" }),
    ]);
    expect(items.map((i) => [i.object, i.uid, i.reason])).toEqual([
      ["default/v6", "u-v6", "IPv6Unsupported"],
      ["default/dual", "u-dual", "IPv6Unsupported"],
    ]);
    expect(items[1]!.message).toMatch(
      /^portable-lb serves IPv4 only \(spec\.ipFamilies \["IPv4"\], ipFamilyPolicy RequireDualStack\)/,
    );
  });

  it("says nothing of what it honours: the defaults, and IPv4 with PreferDualStack", () => {
    expect(
      unsupportedFields([
        lbService("plain"),
        withSpec("explicit", { sessionAffinity: "None", externalTrafficPolicy: "Cluster" }),
        // Judged per port by desiredState, where the data plane's abilities are known.
        withSpec("affinity", { sessionAffinity: "ClientIP", externalTrafficPolicy: "Local" }),
        withSpec("prefer", { ipFamilies: ["IPv4"], ipFamilyPolicy: "PreferDualStack" }),
      ]),
    ).toEqual([]);
  });
});
