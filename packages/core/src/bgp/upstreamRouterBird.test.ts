import fc from "fast-check";
import { quotablePassword, routerInput, routerPairInput } from "./testInputs.ts";
import { renderUpstreamRouterBird } from "./upstreamRouterBird.ts";

describe("renderUpstreamRouterBird", () => {
  it("merges up to maximumPaths paths into one kernel route and takes all paths from each reflector", () => {
    const conf = renderUpstreamRouterBird(routerPairInput);
    expect(conf).toContain("  merge paths on limit 64;\n");
    expect(conf).toContain("    add paths rx;\n");
    expect(conf).toContain("protocol bgp reflector_2 from reflector {\n  neighbor 10.0.0.109 internal;\n}");
  });

  it("refuses more paths than BIRD can merge", () => {
    expect(() => renderUpstreamRouterBird({ ...routerInput, maximumPaths: 256 })).toThrow(/limit of 255/);
  });

  it("puts the password verbatim in the reflector template", () => {
    fc.assert(
      fc.property(quotablePassword, (password) => {
        const conf = renderUpstreamRouterBird({ ...routerInput, password });
        expect(conf.split(`\n  password "${password}";\n`)).toHaveLength(2);
      }),
    );
  });
});
