// Turning curl's per-request write-out into a per-backend histogram.
import { parseWriteOut } from "./httpClient.ts";

describe("parseWriteOut", () => {
  const lines = [
    "200\t10.0.1.5\tb1\t10.244.1.10\t0\t",
    "200\t10.0.1.6\tb2\t10.244.2.10\t0\t",
    "200\t10.0.1.5\tb1\t10.244.2.10\t0\t",
    "000\t\t\t\t7\tFailed to connect to 10.1.1.10 port 8080: Connection refused",
    "503\t\t\t\t0\t",
  ].join("\n");

  it("counts answers per backend address, and failures by reason", () => {
    expect(parseWriteOut(lines + "\n", 5, "address")).toEqual({
      counts: { "10.0.1.5": 2, "10.0.1.6": 1 },
      answered: 3,
      failures: 2,
      errors: {
        "curl exit 7: Failed to connect to 10.1.1.10 port 8080: Connection refused": 1,
        "HTTP 503 without X-Backend": 1,
      },
    });
  });

  it("counts by backend name, and requests cut off by the total time as failures", () => {
    expect(parseWriteOut(lines, 8, "name")).toMatchObject({
      counts: { b1: 2, b2: 1 },
      failures: 5,
      errors: expect.objectContaining({ "not sent within the total time": 3 }),
    });
  });

  it("counts by the address requests came from (the LB that forwarded them)", () => {
    expect(parseWriteOut(lines, 5, "client").counts).toEqual({ "10.244.1.10": 1, "10.244.2.10": 2 });
  });
});
