import { renderSpeakerBird } from "./speakerBird.ts";
import { speakerExportGatedInput, speakerInput } from "./testInputs.ts";

/** Each session's protocol block, by the reflector it talks to. */
function sessionBlocks(config: string): Map<string, string> {
  const blocks = config.split(/^(?=protocol bgp )/m).slice(1);
  return new Map(
    blocks.map((b) => [/neighbor (\S+) internal;/.exec(b)![1]!, b.slice(0, b.indexOf("\n}") + 2)]),
  );
}

describe("renderSpeakerBird's export gating", () => {
  it("exports on every session by default, and on exportTo's sessions only when given", () => {
    const all = sessionBlocks(renderSpeakerBird({ ...speakerExportGatedInput, exportTo: undefined }));
    expect([...all.values()].filter((b) => b.includes("export none"))).toEqual([]);
    const gated = sessionBlocks(renderSpeakerBird(speakerExportGatedInput));
    expect(gated.get("172.16.0.5")).not.toContain("export none");
    expect(gated.get("172.16.3.0")).toContain("ipv4 { export none; };");
    // Nothing exported anywhere is a valid state (no reflector's BFD is Up yet).
    const none = sessionBlocks(renderSpeakerBird({ ...speakerExportGatedInput, exportTo: [] }));
    expect([...none.values()].every((b) => b.includes("export none"))).toBe(true);
  });

  it("refuses an exportTo address that is not one of its reflectors, naming it and the reflectors", () => {
    expect(() => renderSpeakerBird({ ...speakerInput, exportTo: ["172.16.0.5", "10.9.9.9"] })).toThrow(
      "exportTo: 10.9.9.9 is not a route reflector of this speaker; name addresses of routeReflectors (172.16.0.5)",
    );
  });
});
