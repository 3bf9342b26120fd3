import { announcedVips } from "./announcements.ts";
import { parseProtocols, sessionProblem } from "./sessionMonitor.ts";
import { exportedPerSession } from "./speakerControl.ts";

describe("announcedVips", () => {
  const svc = (vip: string, weights: number[]) => ({
    vip,
    port: 80,
    protocol: "tcp" as const,
    scheduler: "mh" as const,
    backends: weights.map((weight, i) => ({ ip: `10.244.0.${i + 1}`, port: 8080, weight })),
  });

  it("announces a VIP only while one of its services has a backend taking new flows", () => {
    expect(
      announcedVips([
        svc("10.1.1.2", [1]),
        svc("10.1.1.1", [0, 1]),
        svc("10.1.1.3", [0]),
        svc("10.1.1.4", []),
      ]),
    ).toEqual(["10.1.1.1", "10.1.1.2"]);
    // One port of a VIP with a ready backend is enough to keep the VIP.
    expect(announcedVips([svc("10.1.1.3", [0]), { ...svc("10.1.1.3", [1]), port: 443 }])).toEqual([
      "10.1.1.3",
    ]);
  });
});

describe("exportedPerSession", () => {
  it("reads the exported route count of each established session from birdc show protocols all", () => {
    const text = [
      "BIRD 2.0.12 ready.",
      "Name       Proto      Table      State  Since         Info",
      "device1    Device     ---        up     18:08:11.019  ",
      "reflector_1 BGP        ---        up     18:08:12.100  Established   ",
      "  BGP state:          Established",
      "  Channel ipv4",
      "    State:          UP",
      "    Routes:         0 imported, 2 exported, 0 preferred",
      "reflector_2 BGP        ---        start  18:08:11.019  Active        ",
      "  BGP state:          Active",
      "  Channel ipv4",
      "    State:          DOWN",
      "reflector_3 BGP        ---        up     18:08:12.100  Established   ",
      "    Routes:         0 imported, 0 exported, 0 preferred",
    ].join("\n");
    expect([...exportedPerSession(text)]).toEqual([
      ["reflector_1", 2],
      ["reflector_3", 0],
    ]);
  });
});

describe("parseProtocols", () => {
  it("reads each BGP session's state, last change and last error from birdc show protocols all", () => {
    const text = [
      "BIRD 2.0.12 ready.",
      "Name       Proto      Table      State  Since         Info",
      "device1    Device     ---        up     18:08:11.019  ",
      "",
      "vips       Static     master4    up     18:08:11.019  ",
      "  Channel ipv4",
      "    State:          UP",
      "",
      "reflector_1 BGP        ---        up     18:08:12.100  Established   ",
      "  BGP state:          Established",
      "    Neighbor address: 10.244.1.1",
      "",
      "reflector_2 BGP        ---        start  18:08:11.019  Idle          BGP Error: Bad peer AS",
      "  BGP state:          Idle",
      "    Neighbor address: 10.244.2.1",
      "    Last error:       BGP Error: Bad peer AS",
    ].join("\n");
    expect(parseProtocols(text)).toEqual([
      { name: "reflector_1", established: true, since: "18:08:12.100", info: "Established" },
      {
        name: "reflector_2",
        established: false,
        since: "18:08:11.019",
        info: "Idle          BGP Error: Bad peer AS",
        lastError: "BGP Error: Bad peer AS",
      },
    ]);
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
