import { busySeconds } from "./busyCpu.ts";

describe("busySeconds", () => {
  it("sums every state but idle and iowait, in seconds", () => {
    const stat = [
      "cpu  100 20 300 5000 70 8 12 0 40 0",
      "cpu0 50 10 150 2500 35 4 6 0 20 0",
      "intr 1 2 3",
    ].join("\n");
    expect(busySeconds(stat)).toBeCloseTo((100 + 20 + 300 + 8 + 12 + 0) / 100);
  });

  it("says so when the aggregate line is missing", () => {
    expect(() => busySeconds("cpu0 1 2 3 4 5 6 7 8")).toThrow(/no aggregate `cpu` line/);
  });
});
