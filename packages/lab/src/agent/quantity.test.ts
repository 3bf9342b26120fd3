import { divideUp, parseQuantity } from "./quantity.ts";

describe("parseQuantity", () => {
  it("reads decimal and binary suffixes, exponents and plain numbers", () => {
    expect(parseQuantity("250m")).toBeCloseTo(0.25);
    expect(parseQuantity("2")).toBe(2);
    expect(parseQuantity("1.5")).toBe(1.5);
    expect(parseQuantity("1Ki")).toBe(1024);
    expect(parseQuantity("128Mi")).toBe(128 * 2 ** 20);
    expect(parseQuantity("1G")).toBe(1e9);
    expect(parseQuantity("1e3")).toBe(1000);
    expect(parseQuantity(3)).toBe(3);
    expect(() => parseQuantity("1 GB")).toThrow(/not a resource quantity/);
  });
});

describe("divideUp", () => {
  it("rounds up, without float noise", () => {
    expect(divideUp(0.25, 0.001)).toBe("250");
    expect(divideUp(0.25, 1)).toBe("1");
    expect(divideUp(128 * 2 ** 20, 2 ** 20)).toBe("128");
    expect(divideUp(1, 3)).toBe("1");
    expect(() => divideUp(1, 0)).toThrow(/positive/);
  });
});
