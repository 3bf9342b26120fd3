// IpvsEngine's verification against ipvsadm's semantics (the simulator; the kernel itself is in the
// QEMU conformance test): whatever another program did to IPVS, or left that `-Sn` cannot be read
// as ours, a verification finds it and repairs it toward the last applied state, by property.
import fc from "fast-check";
import type { VirtualService } from "../model.ts";
import { arbitraryState } from "../testing/arbitraries.ts";
import { IpvsEngine } from "./ipvsEngine.ts";
import { formatSave, parseSave } from "./ipvsadmSave.ts";
import { toIpvs } from "./ipvsState.ts";
import { simulate } from "./testing/ipvsSimulator.ts";

/** An IpvsEngine whose ipvsadm is the simulator over `kernel` (text as `-Sn` prints it). */
class SimulatedIpvs extends IpvsEngine {
  kernel = "";
  protected override read() {
    return Promise.resolve(this.readText(this.kernel));
  }
  protected override write(script: string): Promise<void> {
    const lines = script.split("\n").filter((l) => l !== "");
    const cleared = lines[0] === "-C";
    this.kernel = formatSave(
      simulate(cleared ? [] : parseSave(this.kernel), cleared ? lines.slice(1) : lines),
    );
    return Promise.resolve();
  }
}

describe("IpvsEngine.verify", () => {
  it("repairs any foreign change toward the last applied state and then verifies every service", async () => {
    await fc.assert(
      fc.asyncProperty(
        arbitraryState,
        arbitraryState,
        async (applied: VirtualService[], foreign: VirtualService[]) => {
          const engine = new SimulatedIpvs();
          await engine.apply(applied);
          // Someone else's services (other schedulers, weights) replace or join ours.
          engine.kernel = formatSave(toIpvs(foreign).map((s) => ({ ...s, scheduler: "wlc", flags: [] })));
          const report = await engine.verify("quick");
          expect(report.full).toBe(true);
          expect(parseSave(engine.kernel)).toEqual(toIpvs(applied));
          expect([...engine.verified()].length).toBe(applied.length);
          expect((await engine.verify("full")).drift).toEqual([]);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("replaces what it cannot read (a firewall-mark service) with -C and a restore", async () => {
    const engine = new SimulatedIpvs();
    const web = {
      vip: "10.1.1.1",
      port: 80,
      protocol: "tcp",
      scheduler: "mh",
      backends: [{ ip: "10.244.1.5", port: 8080, weight: 1 }],
    } as const;
    await engine.apply([{ ...web, backends: [...web.backends] }]);
    engine.kernel += "-A -f 7 -s rr\n";
    const report = await engine.verify("full");
    expect(report).toMatchObject({
      rebuilt: true,
      drift: [expect.objectContaining({ kind: "unparseable" })],
    });
    expect(parseSave(engine.kernel)).toEqual(toIpvs([{ ...web, backends: [...web.backends] }]));
  });
});
