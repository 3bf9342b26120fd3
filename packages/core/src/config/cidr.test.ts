import { cidrContains, cidrRange, ipv4ToNumber, numberToIpv4 } from "./cidr.ts";

describe("IPv4 arithmetic", () => {
  it("counts addresses as 32-bit numbers, both ways", () => {
    expect(ipv4ToNumber("10.244.1.0")).toBe(10 * 256 ** 3 + 244 * 256 ** 2 + 256);
    expect(numberToIpv4(ipv4ToNumber("255.255.255.255"))).toBe("255.255.255.255");
    expect(cidrRange("10.244.1.7/24")).toEqual({
      first: ipv4ToNumber("10.244.1.0"),
      last: ipv4ToNumber("10.244.1.255"),
    });
  });

  it("tells whether a prefix holds an address, up to its last one", () => {
    expect(cidrContains("10.244.1.0/24", "10.244.1.255")).toBe(true);
    expect(cidrContains("10.244.1.0/24", "10.244.2.0")).toBe(false);
  });
});
