import type { VirtualService } from "../../dataplane/model.ts";
import { withStartingBackends } from "./startingBackends.ts";

const svc = (port: number, forwarding: "dsr" | "snat", ips: string[], weight = 1): VirtualService => ({
  vip: "10.1.1.10",
  port,
  protocol: "tcp",
  scheduler: "mh",
  forwarding,
  backends: ips.map((ip) => ({ ip, port: 8080, weight, nodeName: "n1" })),
});

describe("withStartingBackends", () => {
  it("adds the endpoints not ready yet to DSR services only, taking no flows", () => {
    const decided = [svc(80, "dsr", ["10.244.1.5"]), svc(81, "snat", ["10.244.1.5"])];
    const withStarting = [
      svc(80, "dsr", ["10.244.1.5", "10.244.1.7"]),
      svc(81, "snat", ["10.244.1.5", "10.244.1.7"]),
    ];
    expect(withStartingBackends(decided, withStarting)).toEqual([
      {
        ...decided[0],
        backends: [
          { ip: "10.244.1.5", port: 8080, weight: 1, nodeName: "n1" },
          { ip: "10.244.1.7", port: 8080, weight: 0, nodeName: "n1" },
        ],
      },
      decided[1],
    ]);
  });

  it("keeps the decided services as they are: a ready backend's weight, and the same objects when nothing starts", () => {
    const decided = [svc(80, "dsr", ["10.244.1.5"])];
    // The same pod seen as starting elsewhere (say, another slice) does not lower its weight.
    const out = withStartingBackends(decided, [svc(80, "dsr", ["10.244.1.5"], 0)]);
    expect(out[0]).toBe(decided[0]);
    // A service the decided state does not have (its port is not served) gets nothing.
    expect(withStartingBackends([], [svc(80, "dsr", ["10.244.1.7"])])).toEqual([]);
  });
});
