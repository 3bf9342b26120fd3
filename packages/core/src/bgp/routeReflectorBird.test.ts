import fc from "fast-check";
import { renderRouteReflectorBird } from "./routeReflectorBird.ts";
import { quotablePassword, reflectorInput, reflectorPairInput } from "./testInputs.ts";

/** The lines of a top-level block, from its header to its closing brace. */
function block(conf: string, header: string): string {
  const start = conf.indexOf(`\n${header}\n`);
  if (start < 0) throw new Error(`no block ${header}`);
  return conf.slice(start + 1, conf.indexOf("\n}\n", start) + 2);
}

describe("renderRouteReflectorBird", () => {
  it("sends the routers every path with the LB node kept as next hop", () => {
    const conf = renderRouteReflectorBird(reflectorInput);
    expect(block(conf, "protocol bgp upstream_1 from upstream {")).toContain(
      "  neighbor 10.0.0.110 internal;\n",
    );
    const upstream = block(conf, "template bgp upstream from portable_lb {");
    expect(upstream).toContain("    add paths tx;\n");
    expect(upstream).toContain("    next hop keep;\n");
    expect(upstream).not.toContain("next hop self");
  });

  it("passes on only its own speakers' paths: routers are not clients, and no session to another reflector", () => {
    const conf = renderRouteReflectorBird(reflectorPairInput);
    expect(block(conf, "template bgp upstream from portable_lb {")).not.toContain("rr client");
    expect(conf.match(/^protocol bgp \S+/gm)).toEqual([
      "protocol bgp lb_speakers_1",
      "protocol bgp lb_speakers_2",
      "protocol bgp upstream_1",
      "protocol bgp upstream_2",
    ]);
  });

  it("takes speakers from each range as dynamic neighbors on the speaker-facing address", () => {
    const conf = renderRouteReflectorBird(reflectorPairInput);
    expect(conf).toContain("  local 172.16.3.0 as 4200000001;\n  # Pods reach");
    expect(block(conf, "protocol bgp lb_speakers_2 from lb_speaker {")).toContain(
      "neighbor range 172.17.0.0/16 internal;",
    );
    expect(renderRouteReflectorBird(reflectorInput)).toContain(
      "  local 10.0.0.109 as 65021;\n  # Pods reach",
    );
  });

  it("accepts from speakers only host routes inside the VIP pools", () => {
    const conf = renderRouteReflectorBird(reflectorPairInput);
    expect(conf).toContain("define vip_routes = [ 10.1.1.0/24{32,32}, 192.0.2.0/28{32,32} ];");
    const speakerTemplate = conf.slice(
      conf.indexOf("template bgp lb_speaker"),
      conf.indexOf("protocol bgp lb_speakers_1"),
    );
    expect(speakerTemplate).toContain("import where net ~ vip_routes;");
    expect(speakerTemplate).not.toContain("import all;");
  });

  it("puts the password verbatim in the template every session derives from", () => {
    fc.assert(
      fc.property(quotablePassword, (password) => {
        const conf = renderRouteReflectorBird({ ...reflectorPairInput, password });
        expect(block(conf, "template bgp portable_lb {")).toContain(`\n  password "${password}";\n`);
        expect(conf.split(`password "`)).toHaveLength(2);
        const templates = conf.match(/^template bgp .*$/gm);
        expect(templates?.slice(1).every((t) => t.endsWith(" from portable_lb {"))).toBe(true);
      }),
    );
  });

  it("refuses a password BIRD cannot quote (it has no escapes)", () => {
    const unquotable = fc
      .tuple(fc.string(), fc.constantFrom('"', "\n", "\r", "\t", "\0"), fc.string())
      .map((parts) => parts.join(""));
    fc.assert(
      fc.property(unquotable, (password) => {
        expect(() => renderRouteReflectorBird({ ...reflectorInput, password })).toThrow(/BIRD strings/);
      }),
    );
  });
});
