import { chooseEngine } from "./chooseEngine.ts";

describe("chooseEngine", () => {
  it("uses IPVS in auto only where it can masquerade NAT-mode services, and says why not", () => {
    expect(chooseEngine("auto", { present: true, conntrack: true })).toMatchObject({
      engine: { name: "ipvs" },
      reason: "ipvs",
    });
    const fallback = chooseEngine("auto", { present: true, conntrack: false });
    expect(fallback).toMatchObject({ engine: { name: "nftables" }, reason: "ipvs-cannot-masquerade" });
    expect(fallback.warning).toMatch(/net\.ipv4\.vs\.conntrack is not 1.*set dataPlane\.engine to ipvs/);
    const none = chooseEngine("auto", { present: false, conntrack: false });
    expect(none).toMatchObject({ engine: { name: "nftables" }, reason: "no-ipvs" });
    expect(none.warning).toBeUndefined();
  });

  it("refuses a forced ipvs that could not work, naming the fix", () => {
    expect(() => chooseEngine("ipvs", { present: false, conntrack: false })).toThrow(
      /kernel has no IPVS.*load the ip_vs module/,
    );
    expect(() => chooseEngine("ipvs", { present: true, conntrack: false })).toThrow(
      /net\.ipv4\.vs\.conntrack is not 1.*allowedUnsafeSysctls/,
    );
    expect(chooseEngine("ipvs", { present: true, conntrack: true }).engine.name).toBe("ipvs");
    expect(chooseEngine("nftables", { present: true, conntrack: true }).engine.name).toBe("nftables");
  });
});
