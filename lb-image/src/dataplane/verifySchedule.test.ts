import { VerifySchedule } from "./verifySchedule.ts";

const schedule = (fullReads = () => true) =>
  new VerifySchedule({ trigger: () => undefined, minIntervalMs: 500, costFactor: 10, fullReads });

describe("VerifySchedule", () => {
  it("spaces cheap checks and full reads by what they cost, never closer than the minimum", () => {
    const s = schedule();
    expect(s.take(0)).toBe("full"); // nothing read yet
    s.done("full", 20, 20, 0);
    expect(s.take(400)).toBeUndefined();
    expect(s.take(500)).toBe("quick");
    s.done("quick", 100, 20, 500);
    expect(s.take(999)).toBeUndefined(); // the next cheap check 10 × 100 ms later, at 1.5 s
    expect(s.take(1_000)).toBe("full"); // a full read every 1 s at least on a small table
    // A full read of 2.3 s (1,000 services) comes 20 × its cost later.
    s.done("full", 2_300, 2_300, 2_000);
    expect(s.take(2_000 + 45_999)).toBe("quick");
    expect(s.take(2_000 + 46_000)).toBe("full");
  });

  it("runs no scheduled full read while the engine cannot afford one, but a suspected change still gets it", () => {
    let affordable = false;
    const s = schedule(() => affordable);
    s.done("full", 30_000, 30_000, 0);
    expect(s.take(10 * 3_600_000)).toBe("quick");
    s.suspect();
    expect(s.take(10 * 3_600_000)).toBe("full");
    affordable = true;
    expect(s.take(20 * 3_600_000)).toBe("full");
  });

  it("makes a cheap check at once when asked to (news of a change), and only one", () => {
    let triggers = 0;
    const s = new VerifySchedule({ trigger: () => triggers++, minIntervalMs: 500 });
    s.done("full", 20, 20, 0);
    expect(s.take(100)).toBeUndefined();
    s.soon();
    expect(triggers).toBe(1);
    expect(s.take(100)).toBe("quick");
    expect(s.take(100)).toBeUndefined();
    // Asked while a check was under way: the one after it is not held back to its time.
    s.soon();
    s.done("quick", 10, 20, 150);
    expect(s.take(160)).toBe("quick");
    // A full read due meanwhile answers it too.
    s.soon();
    expect(s.take(1_000)).toBe("full");
    s.done("full", 20, 20, 1_000);
    expect(s.take(1_100)).toBeUndefined();
  });
});
