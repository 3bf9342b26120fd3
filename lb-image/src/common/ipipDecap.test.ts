import type { V1Lease } from "@kubernetes/client-node";
import { IPIP_DECAP_LABEL, ipipDecapLeaseName, nodesWithoutIpip, saidOf } from "./ipipDecap.ts";

const lease = (node: string | undefined, decap: string | undefined): V1Lease => ({
  metadata: {
    name: ipipDecapLeaseName(node ?? "x"),
    ...(decap !== undefined && { labels: { [IPIP_DECAP_LABEL]: decap } }),
  },
  spec: node === undefined ? {} : { holderIdentity: node },
});

describe("nodesWithoutIpip", () => {
  it("names the nodes whose agents found no ipip, from their Leases", () => {
    expect(
      nodesWithoutIpip([
        lease("n1", "false"),
        lease("n2", "true"),
        lease("n3", "false"),
        // Not a node's say: no holder, or no label.
        lease(undefined, "false"),
        lease("n4", undefined),
      ]),
    ).toEqual(new Set(["n1", "n3"]));
    expect(ipipDecapLeaseName("worker-1")).toBe("portable-lb-ipip-worker-1");
  });
});

describe("saidOf", () => {
  it("reads what the node's own Lease says, and nothing from another's", () => {
    const leases = [lease("n1", "false"), lease("n2", "true"), lease("n3", "maybe")];
    expect(saidOf(leases, "n1")).toBe(false);
    expect(saidOf(leases, "n2")).toBe(true);
    expect(saidOf(leases, "n3")).toBeUndefined();
    expect(saidOf(leases, "n4")).toBeUndefined();
    // Another node's Lease under this node's name does not count.
    expect(
      saidOf(
        [
          {
            ...lease("n2", "false"),
            metadata: { ...lease("n2", "false").metadata, name: ipipDecapLeaseName("n1") },
          },
        ],
        "n1",
      ),
    ).toBeUndefined();
  });
});
