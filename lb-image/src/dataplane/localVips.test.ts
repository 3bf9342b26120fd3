// Local VIP routes in a network namespace of its own: adopted at start, applied by diff in one batch,
// read again after a failed apply, and routes outside the VIP pools left alone.
import { execFileSync } from "node:child_process";
import { LocalVips } from "./localVips.ts";

const NS = `plb-lvip-${process.pid}`;
const ip: [string, ...string[]] = ["ip", "netns", "exec", NS, "ip"];
beforeAll(() => {
  execFileSync("ip", ["netns", "add", NS]);
  execFileSync("ip", ["-n", NS, "link", "set", "lo", "up"]);
});
afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

const routes = () =>
  (
    JSON.parse(
      execFileSync("ip", ["-n", NS, "-j", "route", "show", "table", "local", "type", "local", "dev", "lo"], {
        encoding: "utf8",
      }),
    ) as { dst: string }[]
  )
    .map((r) => r.dst)
    .filter((d) => !d.startsWith("127."))
    .sort();
const addRoute = (dst: string) =>
  execFileSync("ip", ["-n", NS, "route", "replace", "local", dst, "dev", "lo", "table", "local"]);

describe("LocalVips", () => {
  it("adopts what is there, changes only the difference, and reads the kernel again after a failure", async () => {
    addRoute("10.1.1.9"); // a VIP a previous controller left
    addRoute("192.0.2.1"); // not in a pool: never touched
    const vips = new LocalVips(["10.1.1.0/24"], ip);

    expect(await vips.apply(["10.1.1.1", "10.1.1.2"])).toBe(3);
    expect(routes()).toEqual(["10.1.1.1", "10.1.1.2", "192.0.2.1"]);
    expect(await vips.apply(["10.1.1.2", "10.1.1.1"])).toBe(0);

    // A failed batch leaves the kernel unknown; the next apply reads it and converges.
    await expect(vips.apply(["10.1.1.1", "10.1.1.2", "10.1.1.300"])).rejects.toThrow(/ip/);
    execFileSync("ip", ["-n", NS, "route", "del", "local", "10.1.1.1", "dev", "lo", "table", "local"]);
    expect(await vips.apply(["10.1.1.1", "10.1.1.3"])).toBe(3);
    expect(routes()).toEqual(["10.1.1.1", "10.1.1.3", "192.0.2.1"]);
  });
});
