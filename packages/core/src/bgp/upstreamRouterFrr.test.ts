import fc from "fast-check";
import { quotablePassword, routerInput, routerPairInput } from "./testInputs.ts";
import { renderUpstreamRouterFrr, routerAdvice } from "./upstreamRouterFrr.ts";

describe("renderUpstreamRouterFrr", () => {
  it("peers with every reflector through one iBGP peer-group and installs up to maximumPaths paths", () => {
    const conf = renderUpstreamRouterFrr(routerPairInput);
    expect(conf).toContain(" neighbor portable-lb-reflectors remote-as 4200000001\n");
    expect(conf).toContain(" neighbor 10.0.0.108 peer-group portable-lb-reflectors\n");
    expect(conf).toContain(" neighbor 10.0.0.109 peer-group portable-lb-reflectors\n");
    expect(conf).toContain("  maximum-paths ibgp 64\n");
    expect(conf).toContain(" neighbor portable-lb-reflectors timers 10 30\n");
  });

  it("names its pieces after the platform, so two platforms' snippets share one router", () => {
    // The names after peer-group, profile and route-map, comments aside.
    const pieces = (conf: string) =>
      [...conf.replace(/^\s*!.*$/gm, "").matchAll(/(?:peer-group|profile|route-map) (\S+)/g)]
        .map((m) => m[1]!)
        .sort();
    const a = renderUpstreamRouterFrr({ ...routerPairInput, platformName: "plb-lab" });
    const b = renderUpstreamRouterFrr({ ...routerPairInput, platformName: "plb-lab-b" });
    expect(new Set(pieces(a))).toEqual(
      new Set([
        "portable-lb-plb-lab-reflectors",
        "portable-lb-plb-lab",
        "portable-lb-plb-lab-reflectors-out",
      ]),
    );
    expect(pieces(a).filter((p) => pieces(b).includes(p))).toEqual([]);
    expect(() => renderUpstreamRouterFrr({ ...routerPairInput, platformName: "a b" })).toThrow(
      /platform name/,
    );
  });

  it("puts the password verbatim on the peer-group", () => {
    fc.assert(
      fc.property(quotablePassword, (password) => {
        const conf = renderUpstreamRouterFrr({ ...routerInput, password });
        expect(conf).toContain(`\n neighbor portable-lb-reflectors password ${password}\n`);
      }),
    );
  });

  it("refuses a password that is not one word (FRR's CLI has no quoting)", () => {
    const notOneWord = fc
      .tuple(fc.string(), fc.constantFrom(" ", "\t", "\n", "\0"), fc.string())
      .map((parts) => parts.join(""));
    fc.assert(
      fc.property(notOneWord, (password) => {
        expect(() => renderUpstreamRouterFrr({ ...routerInput, password })).toThrow(/no quoting/);
      }),
    );
    expect(() => renderUpstreamRouterFrr({ ...routerInput, password: "" })).toThrow(/no quoting/);
  });

  it.each(["dsr", "snat"] as const)(
    "advises L4 multipath hashing and resilient groups in one line (%s)",
    (mode) => {
      const advice = routerAdvice(mode);
      expect(advice).toContain("sysctl -w net.ipv4.fib_multipath_hash_policy=1");
      expect(advice).toContain("type resilient");
      expect(advice).not.toContain("\n");
    },
  );

  it("says what resilient groups add under DSR, and what they save under SNAT", () => {
    expect(routerAdvice("dsr")).toMatch(/without breaking them.*extra protection/);
    expect(routerAdvice("snat")).toMatch(
      /resets\) more than 1\/N of the flows; dataPlane.mode dsr keeps them/,
    );
  });
});
