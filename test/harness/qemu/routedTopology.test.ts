// The routed topology's address plan and script shape (ipvsRouted.test.ts runs it for real).
import { GUEST_PATHS } from "./guestPaths.ts";
import { routedTopology } from "./routedTopology.ts";

describe("routedTopology", () => {
  it("routes every backend's replies to the router, never through an lb", () => {
    const topo = routedTopology({ backends: 2, lbs: 2 });
    expect(topo.backendIps).toEqual(["10.3.21.2", "10.3.22.2"]);
    expect(topo.lbs).toEqual([
      { ns: "lb1", ip: "10.3.11.2" },
      { ns: "lb2", ip: "10.3.12.2" },
    ]);
    expect(topo.script).toContain(`${GUEST_PATHS.ip} -n b1 route add default via 10.3.21.1`);
    expect(topo.script).toContain(`${GUEST_PATHS.ip} -n router addr add 10.3.21.1/24 dev b1`);
    expect(topo.script).not.toMatch(/-n b\d route add default via 10\.3\.1\d\./);
  });

  it("prepares backends for tunnel mode and points the VIPs at the lb asked for", () => {
    const topo = routedTopology({ backends: 1, lbs: 2 });
    expect(topo.script).toContain(`${GUEST_PATHS.ip} -n b1 addr add ${topo.dsrVip}/32 dev lo`);
    expect(topo.script).toContain(`${GUEST_PATHS.ip} -n b1 link set tunl0 up`);
    expect(topo.script).toMatch(/arp_ignore=1 net\.ipv4\.conf\.all\.arp_announce=2/);
    expect(topo.routeVipsVia(1)).toBe(
      `${GUEST_PATHS.ip} -n router route replace ${topo.snatVip}/32 via 10.3.12.2 && ${GUEST_PATHS.ip} -n router route replace ${topo.dsrVip}/32 via 10.3.12.2`,
    );
  });

  it.each([
    [{ backends: 0, lbs: 1 }, /backends must be an integer from 1 to 50/],
    [{ backends: 1, lbs: 10 }, /lbs must be an integer from 1 to 9/],
  ])("refuses %p", (opts, message) => {
    expect(() => routedTopology(opts)).toThrow(message);
  });
});
