import { cpuSeconds } from "./busyCpu.ts";

describe("cpuSeconds", () => {
  it("sums every state but idle, iowait and steal as busy, and gives steal apart, in seconds", () => {
    const stat = [
      "cpu  100 20 300 5000 70 8 12 30 40 0",
      "cpu0 50 10 150 2500 35 4 6 15 20 0",
      "intr 1 2 3",
    ].join("\n");
    const s = cpuSeconds(stat);
    expect(s.busy).toBeCloseTo((100 + 20 + 300 + 8 + 12) / 100);
    expect(s.steal).toBeCloseTo(30 / 100);
  });

  it("says so when the aggregate line is missing", () => {
    expect(() => cpuSeconds("cpu0 1 2 3 4 5 6 7 8")).toThrow(/no aggregate `cpu` line/);
  });
});
