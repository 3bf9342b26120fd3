import { announcement } from "./announcements.ts";
import { sessionProblem } from "./sessionMonitor.ts";

describe("announcement", () => {
  const svc = (vip: string, weights: number[]) => ({
    vip,
    port: 80,
    protocol: "tcp" as const,
    scheduler: "mh" as const,
    backends: weights.map((weight, i) => ({ ip: `10.244.0.${i + 1}`, port: 8080, weight })),
  });

  it("announces a VIP only while one of its services has a backend taking new flows", () => {
    expect(
      announcement([
        svc("10.1.1.2", [1]),
        svc("10.1.1.1", [0, 1]),
        svc("10.1.1.3", [0]),
        svc("10.1.1.4", []),
      ]),
    ).toEqual({
      vips: ["10.1.1.1", "10.1.1.2"],
      heldBack: { AnnounceDisabled: [], NoReadyBackend: ["10.1.1.3", "10.1.1.4"] },
    });
    // One port of a VIP with a ready backend is enough to keep the VIP.
    expect(announcement([svc("10.1.1.3", [0]), { ...svc("10.1.1.3", [1]), port: 443 }]).vips).toEqual([
      "10.1.1.3",
    ]);
  });

  it("holds back the VIPs their Services hold back, ready or not, and says why once", () => {
    const services = [svc("10.1.1.1", [1]), svc("10.1.1.2", [1]), { ...svc("10.1.1.2", [1]), port: 443 }];
    expect(announcement([...services, svc("10.1.1.3", [0])], new Set(["10.1.1.2", "10.1.1.3"]))).toEqual({
      vips: ["10.1.1.1"],
      heldBack: { AnnounceDisabled: ["10.1.1.2", "10.1.1.3"], NoReadyBackend: [] },
    });
    // A VIP held back that this pod does not serve is nothing it holds back.
    expect(announcement(services, new Set(["10.1.1.9"])).heldBack.AnnounceDisabled).toEqual([]);
  });
});

describe("sessionProblem", () => {
  it.each([
    ["Idle          Received: Bad peer AS", /bgp\.asn must be the route reflectors' AS/],
    ["Idle          BGP Error: Bad peer AS", /bgp\.asn must be the route reflectors' AS/],
    ["Active        Socket: Connection refused", /route reflector runs/],
    ["Active        Socket: No route to host", /no route to the reflector/],
    ["Connect       Socket: Connection timed out", /BGP password \(TCP MD5, bgp\.passwordFile\)/],
    ["Active        Socket: Connection closed", /refuses this pod \(its AS number, bgp\.asn/],
  ])("names the field to check for %s, and quotes BIRD", (info, hint) => {
    const problem = sessionProblem(info);
    expect(problem).toMatch(hint);
    expect(problem).toContain(`(BIRD: ${info.replace(/^\S+\s*/, "")})`);
  });
});
