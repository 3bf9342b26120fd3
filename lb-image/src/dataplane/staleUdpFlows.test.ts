// Which UDP flows go stale when backends leave, and their deletion from a real conntrack table in a
// network namespace of its own (entries inserted as SNAT leaves them: client -> VIP, answered by
// the backend to the LB pod).
import { execFileSync } from "node:child_process";
import type { VirtualService } from "./model.ts";
import { flushStaleUdpFlows, staleUdpFlows } from "./staleUdpFlows.ts";

const svc = (o: Partial<VirtualService> & Pick<VirtualService, "protocol" | "backends">): VirtualService => ({
  vip: "10.1.1.10",
  port: 53,
  scheduler: "mh",
  ...o,
});
const b = (ip: string, weight = 1) => ({ ip, port: 5353, weight });

describe("staleUdpFlows", () => {
  it("lists the UDP SNAT backends that left; draining ones, TCP and DSR keep theirs", () => {
    const before = [
      svc({ protocol: "udp", backends: [b("10.244.0.5"), b("10.244.0.6"), b("10.244.0.7")] }),
      svc({ protocol: "tcp", backends: [b("10.244.0.5")] }),
      svc({ protocol: "udp", port: 54, forwarding: "dsr", backends: [b("10.244.0.5")] }),
      svc({ protocol: "udp", vip: "10.1.1.11", backends: [b("10.244.0.8")] }),
    ];
    const after = [
      // .5 left, .6 drains (weight 0), .7 stays.
      svc({ protocol: "udp", backends: [b("10.244.0.6", 0), b("10.244.0.7")] }),
      // The TCP and DSR services lose their backend; the other UDP one goes altogether.
      svc({ protocol: "tcp", backends: [] }),
      svc({ protocol: "udp", port: 54, forwarding: "dsr", backends: [] }),
    ];
    expect(staleUdpFlows(before, after)).toEqual([
      { vip: "10.1.1.10", port: 53, backend: { ip: "10.244.0.5", port: 5353 } },
      { vip: "10.1.1.11", port: 53, backend: { ip: "10.244.0.8", port: 5353 } },
    ]);
    expect(staleUdpFlows(after, after)).toEqual([]);
  });
});

describe("flushStaleUdpFlows on the kernel's conntrack", () => {
  const NS = `plb-ct-${process.pid}`;
  const inNs = (...args: string[]) =>
    execFileSync("ip", ["netns", "exec", NS, ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  beforeAll(() => execFileSync("ip", ["netns", "add", NS]));
  afterAll(() => execFileSync("ip", ["netns", "delete", NS]));

  /** A UDP flow as SNAT leaves it: client:sport -> VIP:53, answered by `backend`:5353 to the LB pod. */
  const insert = (sport: number, backend: string, vip = "10.1.1.10") =>
    inNs(
      "conntrack",
      "-I",
      "-p",
      "udp",
      "-s",
      "10.10.0.2",
      "-d",
      vip,
      "--sport",
      String(sport),
      "--dport",
      "53",
      "-r",
      backend,
      "-q",
      "10.244.0.1",
      "--reply-port-src",
      "5353",
      "--reply-port-dst",
      String(sport),
      "-t",
      "120",
    );
  const flows = () =>
    inNs("conntrack", "-L", "-p", "udp")
      .split("\n")
      .filter(Boolean)
      .map((l) => /sport=(\d+) .*\bsrc=(\S+) dst=10\.244\.0\.1/.exec(l)!.slice(1).join(" "))
      .sort();

  it("deletes the entries to the backends that left and no other, and takes nothing found as done", async () => {
    insert(5000, "10.244.0.5");
    insert(5001, "10.244.0.6");
    insert(5002, "10.244.0.5", "10.1.1.11");
    const prefix = ["ip", "netns", "exec", NS];
    const gone = { vip: "10.1.1.10", port: 53, backend: { ip: "10.244.0.5", port: 5353 } };
    expect(await flushStaleUdpFlows(prefix, [gone])).toBe(1);
    expect(flows()).toEqual(["5001 10.244.0.6", "5002 10.244.0.5"]);
    // Nothing left to delete (conntrack exits 1 then): not a failure.
    await expect(flushStaleUdpFlows(prefix, [gone])).resolves.toBe(1);
    // A real failure is one.
    await expect(flushStaleUdpFlows(["ip", "netns", "exec", `${NS}-absent`], [gone])).rejects.toThrow(
      /conntrack -D -p udp --orig-dst 10\.1\.1\.10 .* failed/,
    );
  });
});
