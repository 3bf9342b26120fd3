import { describe, expect, it } from "@jest/globals";
import { parseTunnelListings, READ_BATCH, tunnelPlan } from "./lbTunnels.ts";

// `ip -j rule show` as iproute2 prints our rules. The skip rule's protocol depends on the files
// beside `ip`: a name where /etc/protocols has UDP (the host), `ipproto-17` where there is none
// (iproute2 6.1 in the LB image: read wrongly, it made the controller delete and re-add the rule
// every second in the lab).
const rules = (ipproto: string | number) =>
  JSON.stringify([
    { priority: 0, src: "all", table: "local" },
    { priority: 100, src: "all", ipproto, dport: 4789, goto: 32000, protocol: "212" },
    { priority: 32000, src: "all", table: "local", protocol: "212" },
  ]);

/** READ_BATCH's output in a pod namespace: eth0 (MTU 1450) carries the default route; `rules` as given. */
const batch = (rulesJson: string) =>
  [
    JSON.stringify([
      { ifname: "lo", mtu: 65536, flags: ["LOOPBACK", "UP"], address: "00:00:00:00:00:00" },
      { ifname: "eth0", mtu: 1450, flags: ["UP"], address: "0a:58:0a:f4:01:05" },
    ]),
    "[]",
    rulesJson,
    "[]",
    JSON.stringify([{ dst: "default", gateway: "10.244.1.1", dev: "eth0", flags: [] }]),
  ].join("\n") + "\n";

describe("parseTunnelListings", () => {
  it("reads one listing per command of the batch, and the uplink's MTU from the default route", () => {
    expect(parseTunnelListings(batch(rules("udp"))).uplinkMtu).toBe(1450);
    expect(() => parseTunnelListings(batch(rules("udp")).split("\n").slice(1).join("\n"))).toThrow(
      `ip -batch printed ${READ_BATCH.length - 1} listings for ${READ_BATCH.length} commands`,
    );
  });

  it.each(["udp", "ipproto-17", "17", 17])("reads the skip rule's protocol printed as %p", (ipproto) => {
    const { state } = parseTunnelListings(batch(rules(ipproto)));
    expect(state.rules).toEqual([
      { pref: 100, udpDport: 4789, goto: 32000 },
      { pref: 32000, table: "local" },
    ]);
    // So a plan finds both rules in place (only the kernel's own `local` rule moves).
    expect(tunnelPlan(state, ["10.244.2.5"], 1500).filter((c) => c.startsWith("rule"))).toEqual([
      "rule del pref 0 lookup local",
      "rule add pref 101 fwmark 183763461 lookup 183763461 protocol 212",
    ]);
  });

  it("takes a rule for another protocol as not ours, so a plan replaces it", () => {
    const { state } = parseTunnelListings(batch(rules("tcp")));
    expect(state.rules[0]).toEqual({ pref: 100, goto: 32000 });
    expect(tunnelPlan(state, ["10.244.2.5"], 1500)).toContain("rule del pref 100 goto 32000 protocol 212");
  });
});

describe("tunnelPlan", () => {
  const empty = { rules: [], kernelLocal: true, routes: new Map() };

  it("routes a handover's peers through the broadcast next hop, beside the backends' tunnels", () => {
    const cmds = tunnelPlan(empty, ["10.244.2.5"], 1450, {
      peers: ["192.168.100.11"],
      uplinkMac: "0a:58:0a:f4:01:05",
    });
    // The device's own MAC, made from the pod's uplink: another platform's LB pod has another.
    expect(cmds).toContain("link set plb-dsr address 06:58:0a:f4:01:05 mtu 1400 up");
    expect(cmds).toContain("neigh replace 169.254.255.2 lladdr ff:ff:ff:ff:ff:ff dev plb-dsr nud permanent");
    expect(cmds).toContain(
      "route replace default via 169.254.255.2 dev plb-dsr onlink encap ip id 7367778 dst 192.168.100.11 table 3232261131 proto 212",
    );
    expect(cmds).toContain(
      "route replace default via 169.254.255.1 dev plb-dsr onlink encap ip id 7367778 dst 10.244.2.5 table 183763461 proto 212",
    );
    expect(cmds).toContain("rule add pref 101 fwmark 3232261131 lookup 3232261131 protocol 212");
  });

  it("moves a route whose next hop is the other kind, and drops the broadcast neighbour with the last peer", () => {
    const found = {
      ...empty,
      device: { vxlanExternal: true, port: 4789, mac: "06:58:0a:f4:01:05", mtu: 1400, up: true },
      neighbour: { lladdr: "02:70:6c:62:00:01", permanent: true },
      handoverNeighbour: { lladdr: "ff:ff:ff:ff:ff:ff", permanent: true },
      routes: new Map([[3232261131, { dst: "192.168.100.11", via: "169.254.255.2" }]]),
    };
    const cmds = tunnelPlan(found, ["192.168.100.11"], 1450, { uplinkMac: "0a:58:0a:f4:01:05" });
    expect(cmds).toContain("neigh del 169.254.255.2 dev plb-dsr");
    expect(cmds).toContain(
      "route replace default via 169.254.255.1 dev plb-dsr onlink encap ip id 7367778 dst 192.168.100.11 table 3232261131 proto 212",
    );
    expect(cmds.some((c) => c.startsWith("link"))).toBe(false);
  });
});
