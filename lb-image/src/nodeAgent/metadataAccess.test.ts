import { accessScript, desiredMetadataAccess, parseAccessSet } from "./metadataAccess.ts";

describe("the LB pods' metadata access", () => {
  it("lets the node's LB pods through in the cloud-routes mode only, each once", () => {
    expect(desiredMetadataAccess("cloud-routes", ["10.244.1.11", "10.244.1.10", "10.244.1.11"])).toEqual([
      "10.244.1.10",
      "10.244.1.11",
    ]);
    expect(desiredMetadataAccess("bgp", ["10.244.1.10"])).toEqual([]);
  });

  it("reads the guard's set as nft lists it, empty or not", () => {
    const set = (elem?: string[]) =>
      JSON.stringify({
        nftables: [
          { metainfo: { version: "1.0.6" } },
          {
            set: {
              family: "inet",
              name: "lb_pods",
              table: "portable_lb_metadata_guard",
              type: "ipv4_addr",
              ...(elem && { elem }),
            },
          },
        ],
      });
    expect(parseAccessSet(set())).toEqual([]);
    expect(parseAccessSet(set(["10.244.1.11", "10.244.1.10"]))).toEqual(["10.244.1.10", "10.244.1.11"]);
  });

  it("changes only what differs, in one script, and nothing when the set is right", () => {
    expect(accessScript(["10.244.1.10", "10.244.1.12"], ["10.244.1.10", "10.244.1.11"])).toBe(
      "delete element inet portable_lb_metadata_guard lb_pods { 10.244.1.12 }\n" +
        "add element inet portable_lb_metadata_guard lb_pods { 10.244.1.11 }\n",
    );
    expect(accessScript(["10.244.1.10"], ["10.244.1.10"])).toBe("");
    expect(accessScript([], [])).toBe("");
  });
});
