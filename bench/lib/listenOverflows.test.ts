import { listenOverflows } from "./listenOverflows.ts";

describe("listenOverflows", () => {
  it("reads TcpExt's ListenOverflows from /proc/net/netstat", () => {
    const netstat = [
      "TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops",
      "TcpExt: 0 0 2456 2460",
      "IpExt: InNoRoutes InTruncatedPkts",
      "IpExt: 0 0",
      "",
    ].join("\n");
    expect(listenOverflows(netstat)).toBe(2456);
  });

  it("says so when the counter is missing", () => {
    expect(() => listenOverflows("IpExt: InNoRoutes\nIpExt: 0\n")).toThrow(/no TcpExt ListenOverflows/);
  });
});
