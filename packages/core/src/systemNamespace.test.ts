import { installMocks, typeChain, valueOf } from "../../../test/unit/pulumiMocks.ts";
import { SystemNamespace } from "./systemNamespace.ts";

const recorded = installMocks();

describe("SystemNamespace", () => {
  it("creates one Namespace, parented to the component, with PSA enforcement and standard labels", async () => {
    const ns = new SystemNamespace("lb", {
      name: "portable-lb-system",
      component: "load-balancer",
      podSecurity: "privileged",
    });

    expect(await valueOf(ns.name)).toBe("portable-lb-system");
    expect(await typeChain(ns.namespace)).toBe(
      "portable-lb:core:SystemNamespace$kubernetes:core/v1:Namespace",
    );
    const namespaces = recorded.filter((r) => r.type === "kubernetes:core/v1:Namespace");
    expect(namespaces).toHaveLength(1);
    expect(namespaces[0]!.inputs.metadata).toEqual({
      name: "portable-lb-system",
      labels: {
        "app.kubernetes.io/part-of": "portable-lb",
        "app.kubernetes.io/managed-by": "pulumi",
        "app.kubernetes.io/component": "load-balancer",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
      },
    });
  });
});
