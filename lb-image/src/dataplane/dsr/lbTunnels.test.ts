import { describe, expect, it } from "@jest/globals";
import { parseTunnelState, tunnelPlan } from "./lbTunnels.ts";

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

describe("parseTunnelState", () => {
  it.each(["udp", "ipproto-17", "17", 17])("reads the skip rule's protocol printed as %p", (ipproto) => {
    const state = parseTunnelState({ link: undefined, neigh: "[]", rules: rules(ipproto), routes: "[]" });
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
    const state = parseTunnelState({ link: undefined, neigh: "[]", rules: rules("tcp"), routes: "[]" });
    expect(state.rules[0]).toEqual({ pref: 100, goto: 32000 });
    expect(tunnelPlan(state, ["10.244.2.5"], 1500)).toContain("rule del pref 100 goto 32000 protocol 212");
  });
});
