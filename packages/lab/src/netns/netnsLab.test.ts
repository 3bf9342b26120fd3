// The lab's pure naming and parsing helpers: names stay within the kernel's limits.
import {
  addressOf,
  checkInterfaceName,
  interfaceName,
  isLabId,
  MAX_IFNAME,
  namespaceName,
  newLabId,
  routeArgs,
} from "./netnsLab.ts";

describe("lab ids and names", () => {
  it("makes short lab ids from random bytes", () => {
    expect(newLabId(new Uint8Array([0, 0, 0, 0]))).toBe("pl0000");
    expect(newLabId(new Uint8Array([255, 255, 255, 255]))).toMatch(/^pl[0-9a-z]{4}$/);
    for (let i = 0; i < 50; i++) expect(newLabId()).toMatch(/^pl[0-9a-z]{4}$/);
  });

  it("tells its own lab ids from other labs' scopes (never reaped as stale)", () => {
    for (let i = 0; i < 20; i++) expect(isLabId(newLabId())).toBe(true);
    for (const other of ["stackplblab", "pl12345", "PL0000", "pl00", ""]) expect(isLabId(other)).toBe(false);
  });

  it("names namespaces <labid>-<name> and refuses names ip netns or shells would trip on", () => {
    expect(namespaceName("pl3k9z", "router")).toBe("pl3k9z-router");
    expect(namespaceName("pl3k9z", "node_1")).toBe("pl3k9z-node_1");
    for (const bad of ["", "-x", "Router", "a b", "a/b", "x".repeat(41)]) {
      expect(() => namespaceName("pl3k9z", bad)).toThrow(`namespace name '${bad}' must be 1-40 characters`);
    }
  });

  it("keeps generated interface names within 15 characters", () => {
    expect(interfaceName("pl3k9z", 1)).toBe("vpl3k9z1");
    expect(interfaceName("pl3k9z", 12_345_678)).toHaveLength(MAX_IFNAME);
    expect(() => interfaceName("pl3k9z", 123_456_789)).toThrow(
      "interface name 'vpl3k9z123456789' must be 1-15 characters",
    );
  });

  it("refuses interface names the kernel refuses", () => {
    expect(checkInterfaceName("eth0")).toBe("eth0");
    for (const bad of ["", ".", "..", "a b", "a/b", "x".repeat(16)]) {
      expect(() => checkInterfaceName(bad)).toThrow(`interface name '${bad}'`);
    }
  });
});

describe("routes and addresses", () => {
  it("strips the prefix length", () => {
    expect(addressOf("10.0.0.1/24")).toBe("10.0.0.1");
    expect(addressOf("10.0.0.1")).toBe("10.0.0.1");
  });

  it("builds a plain route for one gateway and a multipath route for several", () => {
    expect(routeArgs("default", "10.0.0.1")).toEqual(["route", "replace", "default", "via", "10.0.0.1"]);
    expect(routeArgs("10.1.1.10/32", ["10.0.0.11", "10.0.0.12"])).toEqual([
      "route",
      "replace",
      "10.1.1.10/32",
      "nexthop",
      "via",
      "10.0.0.11",
      "nexthop",
      "via",
      "10.0.0.12",
    ]);
    expect(() => routeArgs("10.1.1.10/32", [])).toThrow("route 10.1.1.10/32: give at least one gateway");
  });
});
