import { lbService } from "./testing/k8sObjects.ts";
import { unsupportedFields } from "./unsupportedFields.ts";

const withSpec = (name: string, spec: Record<string, unknown>) => {
  const svc = lbService(name, { uid: `u-${name}` });
  return { ...svc, spec: { ...svc.spec, ...spec } };
};

describe("unsupportedFields", () => {
  it("refuses each field it does not honour, on its Service, naming the field and the way out", () => {
    const items = unsupportedFields([
      withSpec("affinity", { sessionAffinity: "ClientIP" }),
      withSpec("local", { externalTrafficPolicy: "Local" }),
      withSpec("v6", { ipFamilies: ["IPv6"] }),
      withSpec("dual", { ipFamilies: ["IPv4"], ipFamilyPolicy: "RequireDualStack" }),
    ]);
    expect(items.map((i) => [i.object, i.uid, i.reason])).toEqual([
      ["default/affinity", "u-affinity", "SessionAffinityUnsupported"],
      ["default/local", "u-local", "ExternalTrafficPolicyUnsupported"],
      ["default/v6", "u-v6", "IPv6Unsupported"],
      ["default/dual", "u-dual", "IPv6Unsupported"],
    ]);
    expect(items[0]!.message).toMatch(
      /^spec\.sessionAffinity ClientIP is not implemented yet .* set sessionAffinity None/,
    );
    expect(items[1]!.message).toMatch(
      /^spec\.externalTrafficPolicy Local is not implemented yet .* Set it to Cluster/,
    );
    expect(items[3]!.message).toMatch(
      /^portable-lb serves IPv4 only \(spec\.ipFamilies \["IPv4"\], ipFamilyPolicy RequireDualStack\)/,
    );
  });

  it("says nothing of what it honours: the defaults, and IPv4 with PreferDualStack", () => {
    expect(
      unsupportedFields([
        lbService("plain"),
        withSpec("explicit", { sessionAffinity: "None", externalTrafficPolicy: "Cluster" }),
        withSpec("prefer", { ipFamilies: ["IPv4"], ipFamilyPolicy: "PreferDualStack" }),
      ]),
    ).toEqual([]);
  });
});
