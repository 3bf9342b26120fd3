import { labPlan, parseLabEnvironment } from "../labPlan.ts";
import { unionConfig } from "./router.ts";
import { siteConflict } from "./site.ts";

const network = (nodeCidr: string) => ({
  nodeCidr,
  podCidr: "10.244.0.0/16",
  serviceCidr: "10.96.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.1.0/24", avoidBuggyIps: true }],
});
const a = labPlan(parseLabEnvironment({ kind: "lab" }), network("192.168.100.0/24"));
const member = { name: a.name, nodeCidr: a.nodeCidr, clientCidr: a.client.cidr };

describe("a lab site", () => {
  it("takes a second platform with its own node network behind the same client network", () => {
    const b = labPlan(
      parseLabEnvironment({ kind: "lab", name: "plb-lab-b", site: "plb-lab" }),
      network("192.168.101.0/24"),
    );
    expect(siteConflict(b, [member])).toBeUndefined();
    // A platform meets its own record again on its next up.
    expect(siteConflict(a, [member])).toBeUndefined();
  });

  it("refuses a node network that overlaps another platform's, naming both", () => {
    const b = labPlan(
      parseLabEnvironment({ kind: "lab", name: "plb-lab-b", site: "plb-lab" }),
      network("192.168.100.128/25"),
    );
    expect(siteConflict(b, [member])).toMatch(
      /^network\.nodeCidr: overlaps platform plb-lab's node network 192\.168\.100\.0\/24 .*got "192\.168\.100\.128\/25"/,
    );
  });

  it("refuses another client network than the site's", () => {
    const b = labPlan(
      parseLabEnvironment({ kind: "lab", name: "plb-lab-b", site: "plb-lab", clientCidr: "198.19.0.0/24" }),
      network("192.168.101.0/24"),
    );
    expect(siteConflict(b, [member])).toMatch(
      /^environment\.clientCidr: the site plb-lab has .*198\.18\.0\.0\/24/,
    );
  });
});

describe("the site router's configuration", () => {
  const snippet = (asn: number, peer: string) =>
    `router bgp ${asn}\n neighbor ${peer} remote-as ${asn}\nexit\n`;

  it("is every platform's snippet side by side, in the order of their names", () => {
    const union = unionConfig([
      { platform: "plb-lab-b", config: snippet(64512, "192.168.101.21") },
      { platform: "plb-lab", config: snippet(64512, "192.168.100.21") },
    ]);
    expect(union.indexOf("192.168.100.21")).toBeLessThan(union.indexOf("192.168.101.21"));
    expect(union.match(/^router bgp 64512$/gm)).toHaveLength(2);
  });

  it("refuses platforms of different ASes, naming each", () => {
    expect(() =>
      unionConfig([
        { platform: "plb-lab", config: snippet(64512, "192.168.100.21") },
        { platform: "plb-lab-b", config: snippet(64513, "192.168.101.21") },
      ]),
    ).toThrow(/^loadBalancer\.bgp\.asn: .*plb-lab: 64512, plb-lab-b: 64513/);
  });
});
