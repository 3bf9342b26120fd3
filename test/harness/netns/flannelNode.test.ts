import { hostAddress, parseSubnetEnv } from "./flannelNode.ts";

describe("parseSubnetEnv", () => {
  it("reads the file flanneld v0.26 writes for an IPv4 network", () => {
    const text =
      "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n";
    expect(parseSubnetEnv(text)).toEqual({
      network: "10.244.0.0/16",
      subnet: "10.244.3.1/24",
      mtu: 1500,
      ipMasq: true,
    });
  });

  it("names the variable a file lacks", () => {
    expect(() => parseSubnetEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_MTU=1500\n")).toThrow(
      /no FLANNEL_SUBNET/,
    );
  });
});

describe("hostAddress", () => {
  it("counts from the prefix's first address and keeps its length", () => {
    expect(hostAddress("10.244.3.0/24", 1)).toBe("10.244.3.1/24");
    expect(hostAddress("10.244.3.0/24", 255)).toBe("10.244.3.255/24");
    expect(hostAddress("10.244.0.0/16", 257)).toBe("10.244.1.1/16");
  });

  it("refuses a number outside the prefix", () => {
    expect(() => hostAddress("10.244.3.0/24", 256)).toThrow(/no address number 256/);
    expect(() => hostAddress("10.244.3.0/24", -1)).toThrow(/no address number -1/);
  });
});
